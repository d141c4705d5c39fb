/* libcomm's C API: communicators and collectives in NCCL's shape, for programs written in C (or
 * calling C: Rust, Go, Julia, Python's ctypes) and for frameworks that already speak NCCL.
 *
 * Ranks agree on a unique id (one rank makes it with comm_get_unique_id and hands its bytes to
 * the others, through MPI or a file or the network) and each makes its communicator with
 * comm_init_rank. Collectives take NCCL's arguments in NCCL's order (sendbuff, recvbuff, count,
 * datatype, op, root, comm, stream) and follow NCCL's in-place rules.
 *
 * Buffers may be host memory or CUDA device memory (told apart by asking CUDA about the
 * pointer). Device buffers are ordered on `stream` (a cudaStream_t; NULL: the legacy default
 * stream) as NCCL orders them: the operation runs after the work queued on the stream before
 * the call, and work queued after the call runs after it. Unlike NCCL's, the call returns only
 * once the operation has completed (libcomm's host drives it), so the calling thread waits for
 * the stream's earlier work too. Host buffers ignore the stream. Either way, a call returns when
 * the operation has completed and the buffers may be used again; inside
 * comm_group_start/comm_group_end it is queued instead, and comm_group_end runs the queued calls
 * together and returns when all have completed.
 *
 * Every function returns a comm_result_t; no C++ exception ever leaves it. On failure,
 * comm_get_last_error says what went wrong, on which rank, with which peer, in which operation,
 * and what to do. A communicator is used by one thread at a time, as NCCL's are.
 *
 * Build: cc prog.c $(pkg-config --cflags --libs comm). See docs/c-api.md.
 */
#ifndef COMM_COMM_H
#define COMM_COMM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMM_C_API_VERSION 1

typedef struct comm_communicator* comm_t;

#define COMM_UNIQUE_ID_BYTES 128
/* What the ranks of one communicator agree on: plain bytes, valid in other processes and on other
 * hosts (it names the address of a store that the process which made it hosts, and a secret
 * that proves a rank belongs to the job: hand it only to the job's ranks). */
typedef struct {
  char internal[COMM_UNIQUE_ID_BYTES];
} comm_unique_id;

/* The values of NCCL's ncclResult_t. */
typedef enum {
  COMM_SUCCESS = 0,
  COMM_CUDA_ERROR = 1,       /* a CUDA call failed */
  COMM_SYSTEM_ERROR = 2,     /* the operating system or the network failed: a socket, a mapping */
  COMM_INTERNAL_ERROR = 3,   /* a bug in libcomm: please report it with the message */
  COMM_INVALID_ARGUMENT = 4, /* a bad pointer, count, type, op, rank or root */
  COMM_INVALID_USAGE = 5,    /* calls out of order, or ranks that called different things */
  COMM_REMOTE_ERROR = 6,     /* a peer failed, left, or did not answer within the timeout */
  COMM_IN_PROGRESS = 7       /* a non-blocking init has not finished yet */
} comm_result_t;

/* NCCL's numbering for NCCL's types; COMM_BOOL is libcomm's own. */
typedef enum {
  COMM_INT8 = 0,
  COMM_UINT8 = 1,
  COMM_INT32 = 2,
  COMM_UINT32 = 3,
  COMM_INT64 = 4,
  COMM_UINT64 = 5,
  COMM_FLOAT16 = 6,
  COMM_FLOAT32 = 7,
  COMM_FLOAT64 = 8,
  COMM_BFLOAT16 = 9,
  COMM_BOOL = 10
} comm_datatype_t;

/* NCCL's numbering for NCCL's operators; the bitwise ones (integers and bool only) are libcomm's. */
typedef enum {
  COMM_SUM = 0,
  COMM_PRODUCT = 1,
  COMM_MAX = 2,
  COMM_MIN = 3,
  COMM_AVG = 4,
  COMM_BAND = 5,
  COMM_BOR = 6,
  COMM_BXOR = 7
} comm_op_t;

/* Options for comm_init_rank_config and comm_split. Start from COMM_CONFIG_INITIALIZER: `size`,
 * `magic` and `version` let a later libcomm read a config built against this header. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;   /* 1: init returns when the communicator is ready; 0: it may return
                     COMM_IN_PROGRESS, and comm_get_async_error says when it is ready */
  int timeout_ms; /* how long a call waits for its peers before COMM_REMOTE_ERROR; 0: libcomm's
                     default (COMM_TIMEOUT in seconds, else 30 minutes) */
} comm_config_t;

#define COMM_CONFIG_MAGIC 0x636f6d6du
#define COMM_CONFIG_INITIALIZER \
  { sizeof(comm_config_t), COMM_CONFIG_MAGIC, COMM_C_API_VERSION, 1, 0 }

/* comm_split's color for ranks that join no new communicator (they get NULL). */
#define COMM_SPLIT_NOCOLOR (-1)

/* libcomm's version as major * 10000 + minor * 100 + patch. */
comm_result_t comm_get_version(int* version);

/* A new id; this process hosts the store it names until the last communicator made from it
 * here is destroyed. Each call costs, while it is held, one listening TCP port, one thread and
 * about four descriptors (as NCCL's bootstrap root does). An id that no communicator of this
 * process takes is released by a later call once the init timeout (COMM_TIMEOUT, 30 minutes by
 * default) has passed since it was made and no process is connected to its store. */
comm_result_t comm_get_unique_id(comm_unique_id* id);

/* The communicator of `nranks` ranks that `id` names, as rank `rank`: returns when every rank has
 * joined (inside a group: at comm_group_end). Binds the communicator to the CUDA device current
 * at the call, where there is one. */
comm_result_t comm_init_rank(comm_t* comm, int nranks, comm_unique_id id, int rank);
comm_result_t comm_init_rank_config(comm_t* comm, int nranks, comm_unique_id id, int rank, comm_config_t* config);
/* libcomm's own: the communicator of the job this process was started in, as the C++
 * init_process_group() finds it (env://: commrun, torchrun, mpirun and srun set the variables;
 * docs/bootstrap.md). Blocking; `config` may be NULL. */
comm_result_t comm_init_from_environment(comm_t* comm, comm_config_t* config);

/* Every rank of `comm` calls it; the ranks with one color form a new communicator, numbered by
 * `key` (ties: by rank in `comm`). It shares `comm`'s connections. COMM_SPLIT_NOCOLOR: *newcomm
 * is NULL. `config` may be NULL (comm's). */
comm_result_t comm_split(comm_t comm, int color, int key, comm_t* newcomm, comm_config_t* config);

/* Recovery (docs/recovery.md). comm_revoke: any rank, alone: every operation pending or later
 * started on `comm`, on every rank, fails (COMM_REMOTE_ERROR; comm_get_last_error says which rank
 * revoked it and `reason`, which may be NULL). A rank's death revokes its communicators by itself.
 * comm_shrink: every survivor calls it (the dead do not), with the same `exclude` list (ranks of
 * `comm` to leave out though alive; may be NULL with count 0): the survivors agree on who is out
 * (those listed and every rank found dead, even one dying meanwhile) and each gets the same new
 * communicator of the rest, numbered in `comm`'s order, over the same connections. `comm` is
 * revoked first and stays usable only for comm_destroy. `config` may be NULL. */
comm_result_t comm_revoke(comm_t comm, const char* reason);
comm_result_t comm_shrink(comm_t comm, const int* exclude, int exclude_count, comm_t* newcomm, comm_config_t* config);
/* Growing a communicator by new processes. Every member calls comm_grow(comm, nranks, id or NULL,
 * -1, &newcomm, config), nranks being the grown size; one member first makes the id with
 * comm_get_grow_id and hands it to the newcomers (as comm_get_unique_id's id is), each of which
 * calls comm_grow(NULL, nranks, &id, rank, &newcomm, config) with its place, rank in
 * [old size, nranks). The members keep their ranks. Works for communicators made from an id
 * (comm_init_rank) and those split, shrunk or grown from one; the id's store must still be up. */
comm_result_t comm_get_grow_id(comm_t comm, comm_unique_id* id);
comm_result_t comm_grow(comm_t comm, int nranks, const comm_unique_id* id, int rank, comm_t* newcomm,
                        comm_config_t* config);

/* Frees this rank's communicator at once, without waiting for its peers; operations still in
 * flight on it fail. Its peers' later calls on it get COMM_REMOTE_ERROR naming this rank. The
 * handle itself stays valid as a tombstone (a few hundred bytes, until the process exits): any
 * later call on it, destroy and abort included, returns COMM_INVALID_ARGUMENT at once, and
 * comm_get_last_error(comm) says it was destroyed. */
comm_result_t comm_destroy(comm_t comm);
/* Fails every pending operation of the communicator, here and (through the connection) on its
 * peers, then frees it; returns within a second whatever the peers do. Communicators that share
 * its connections (its parent and siblings from comm_split) end with it. The handle stays a
 * tombstone, as after comm_destroy. */
comm_result_t comm_abort(comm_t comm);
/* COMM_SUCCESS, COMM_IN_PROGRESS while a non-blocking init runs, or the error that ended the
 * communicator (a failed init, a dead peer seen by a call, an abort). */
comm_result_t comm_get_async_error(comm_t comm, comm_result_t* async_error);

comm_result_t comm_count(comm_t comm, int* count);
comm_result_t comm_user_rank(comm_t comm, int* rank);
/* The CUDA device the communicator was made on; -1 where there is none. */
comm_result_t comm_cu_device(comm_t comm, int* device);

/* CUDA device memory on the current device (cudaMalloc), for programs that allocate through
 * the communication library (NCCL's ncclMemAlloc); COMM_CUDA_ERROR where there is no GPU. */
comm_result_t comm_mem_alloc(void** ptr, size_t size);
comm_result_t comm_mem_free(void* ptr);

/* Writes this process's flight recorder (its recent calls, COMM_TRACE entries) into `dir` as
 * comm_trace_rank<R>.json; dir NULL or "": COMM_TRACE_DIR, else $TMPDIR or /tmp. See
 * docs/debugging.md. COMM_INVALID_ARGUMENT when the recorder is off (COMM_TRACE=0) or no
 * communicator was made yet. */
comm_result_t comm_dump_trace(const char* dir);

/* A short name of the code ("invalid argument"). */
const char* comm_get_error_string(comm_result_t result);
/* The last failure on `comm`, or with comm NULL the last on this thread, in one line: "" when
 * none. Valid until the next call that fails on the same communicator or thread. */
const char* comm_get_last_error(comm_t comm);

/* Collectives. A count is in elements of `datatype`. In place as in NCCL: all_reduce, broadcast,
 * reduce and reduce_scatter with sendbuff == recvbuff (reduce_scatter: sendbuff + rank * recvcount),
 * all_gather with sendbuff == recvbuff + rank * sendcount. */
comm_result_t comm_all_reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                              comm_op_t op, comm_t comm, void* stream);
comm_result_t comm_broadcast(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, int root,
                             comm_t comm, void* stream);
/* recvbuff matters on the root only; other ranks' recvbuff is left alone (it may be NULL). */
comm_result_t comm_reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_op_t op,
                          int root, comm_t comm, void* stream);
/* recvbuff holds nranks * sendcount elements, rank r's at r * sendcount. */
comm_result_t comm_all_gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                              comm_t comm, void* stream);
/* sendbuff holds nranks * recvcount elements; rank r gets the reduction of block r. */
comm_result_t comm_reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype,
                                  comm_op_t op, comm_t comm, void* stream);
/* Both buffers hold nranks * count elements: block r of sendbuff goes to rank r. */
comm_result_t comm_all_to_all(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_t comm,
                              void* stream);
/* MPI_Allgatherv without displacements: recvcounts[r] elements from rank r, packed in rank order
 * in recvbuff; sendcount must equal recvcounts[rank]. The same recvcounts on every rank (else
 * COMM_INVALID_USAGE on every rank). Host buffers only, for now. */
comm_result_t comm_all_gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                comm_datatype_t datatype, comm_t comm, void* stream);
/* MPI_Alltoallv without displacements: sendcounts[r] elements go to rank r, recvcounts[r] come
 * from it, blocks packed in rank order in each buffer (nranks counts in each array). Every rank's
 * sendcounts[r] must equal rank r's recvcounts for it: a disagreement fails the call on every rank
 * with COMM_INVALID_USAGE. Host buffers only, for now. */
comm_result_t comm_all_to_all_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff,
                                const size_t* recvcounts, comm_datatype_t datatype, comm_t comm, void* stream);
/* MPI_Reduce_scatter: sendbuff holds recvcounts[r] elements for each rank r, packed in rank order;
 * recvbuff gets this rank's block reduced over the ranks (recvcounts[rank] elements). The same
 * recvcounts on every rank (else COMM_INVALID_USAGE on every rank). Host buffers only, for now. */
comm_result_t comm_reduce_scatter_v(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                    comm_datatype_t datatype, comm_op_t op, comm_t comm, void* stream);
/* MPI_Gatherv without displacements: the root's recvbuff gets recvcounts[r] elements from rank r,
 * packed in rank order (recvbuff may be NULL elsewhere). Unlike MPI, every rank passes recvcounts,
 * the same on every rank (a disagreement is COMM_INVALID_USAGE on every rank); sendcount must be
 * recvcounts[rank]. Host buffers only, for now. */
comm_result_t comm_gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                            comm_datatype_t datatype, int root, comm_t comm, void* stream);
/* MPI_Scatterv without displacements: rank r's recvbuff gets block r of the root's sendbuff
 * (sendcounts[r] elements, packed in rank order; sendbuff may be NULL elsewhere). Unlike MPI,
 * every rank passes sendcounts, the same on every rank; recvcount must be at least
 * sendcounts[rank]. Host buffers only, for now. */
comm_result_t comm_scatter_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff, size_t recvcount,
                             comm_datatype_t datatype, int root, comm_t comm, void* stream);
/* The root's recvbuff holds nranks * sendcount elements. */
comm_result_t comm_gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype, int root,
                          comm_t comm, void* stream);
/* The root's sendbuff holds nranks * recvcount elements. */
comm_result_t comm_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype, int root,
                           comm_t comm, void* stream);
comm_result_t comm_barrier(comm_t comm, void* stream);

/* Persistent collectives, as MPI-4's (MPI_Allreduce_init, MPI_Start): comm_<collective>_init
 * takes the collective's arguments, checks them and chooses its algorithm once, on this rank
 * alone (nothing is sent); each comm_prepared_run is then one such collective on the
 * communicator, without that set-up (every rank runs it where it would make the call; a rank may
 * make the same call the ordinary way instead). The buffers' contents may change between runs,
 * their addresses may not. A run inside comm_group_start/end is issued at the group's end;
 * prepare outside one. Free each with comm_prepared_free before destroying its communicator. */
typedef struct comm_prepared* comm_prepared_t;
comm_result_t comm_all_reduce_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                                   comm_op_t op, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_broadcast_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                                  int root, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_reduce_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                               comm_op_t op, int root, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_all_gather_init(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                                   comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_reduce_scatter_init(const void* sendbuff, void* recvbuff, size_t recvcount,
                                       comm_datatype_t datatype, comm_op_t op, comm_t comm,
                                       comm_prepared_t* prepared);
comm_result_t comm_all_to_all_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                                   comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_gather_init(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                               int root, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_scatter_init(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype,
                                int root, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_barrier_init(comm_t comm, comm_prepared_t* prepared);
/* The uneven forms too: their counts are read at _init (the arrays may be reused after it). */
comm_result_t comm_all_gather_v_init(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                     comm_datatype_t datatype, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_reduce_scatter_v_init(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                         comm_datatype_t datatype, comm_op_t op, comm_t comm,
                                         comm_prepared_t* prepared);
comm_result_t comm_all_to_all_v_init(const void* sendbuff, const size_t* sendcounts, void* recvbuff,
                                     const size_t* recvcounts, comm_datatype_t datatype, comm_t comm,
                                     comm_prepared_t* prepared);
comm_result_t comm_gather_v_init(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                 comm_datatype_t datatype, int root, comm_t comm, comm_prepared_t* prepared);
comm_result_t comm_scatter_v_init(const void* sendbuff, const size_t* sendcounts, void* recvbuff, size_t recvcount,
                                  comm_datatype_t datatype, int root, comm_t comm, comm_prepared_t* prepared);
/* One run; `stream` as for the ordinary call. */
comm_result_t comm_prepared_run(comm_prepared_t prepared, void* stream);
/* NULL is allowed. */
comm_result_t comm_prepared_free(comm_prepared_t prepared);

/* Point-to-point. Outside a group a host send may wait for its receive; inside one, sends and
 * receives progress in any order, to self as well. */
comm_result_t comm_send(const void* sendbuff, size_t count, comm_datatype_t datatype, int peer, comm_t comm,
                        void* stream);
comm_result_t comm_recv(void* recvbuff, size_t count, comm_datatype_t datatype, int peer, comm_t comm, void* stream);

/* Groups, per thread and nestable: calls between the outermost start and end are queued (inits
 * too) and run together at the end, which returns when host operations have completed and
 * device operations are enqueued. The first failure is returned; the others are in each
 * communicator's last error. */
comm_result_t comm_group_start(void);
comm_result_t comm_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* COMM_COMM_H */
