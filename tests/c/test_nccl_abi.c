/* A program written for NCCL, built against the drop-in nccl.h and linked with -lnccl from the
 * build (libcomm's libnccl.so.2), on host buffers.
 *
 * Run alone, it drives three ranks from one thread, as NCCL programs drive several GPUs
 * (ncclCommInitAll). Under commrun (RANK set), each process is one rank: rank 0's
 * ncclGetUniqueId reaches the others through the file named on the command line, as an MPI
 * program would broadcast it, then ncclCommInitRank, and a split by parity at the end. Either
 * way, every collective NCCL 2.19 has, with every ncclDataType_t and (for the reductions) every
 * ncclRedOp_t, issued as one group over this process's communicators, in and out of place,
 * against references computed in double; an all-to-all as grouped ncclSend/ncclRecv to every
 * rank, itself included, and as NCCL 2.28's ncclAlltoAll, with its ncclGather and ncclScatter;
 * and what libcomm refuses or accepts without effect (operators made at run time, libcomm's own
 * datatypes and ops, registration, ncclMemAlloc without a GPU, the 2.28 device API).
 *
 *   build/tests/c/test_nccl_abi
 *   commrun -n 4 build/tests/c/test_nccl_abi /tmp/id-file
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "nccl.h"
#include "nccl_check.h"

#define MAX_LOCAL 4

/* The ranks this process drives: comms[k] is rank ranks[k] of a job of `size` ranks. */
struct Job {
  ncclComm_t comms[MAX_LOCAL];
  int ranks[MAX_LOCAL];
  int local;
  int size;
};

static const char* const op_names[] = {"sum", "prod", "max", "min", "avg"};

struct Buffers {
  char* send[MAX_LOCAL];
  char* receive[MAX_LOCAL];
};

static void allocate(const struct Job* job, struct Buffers* buffers, size_t elements, size_t element) {
  int k;
  for (k = 0; k < job->local; ++k) {
    buffers->send[k] = calloc(elements + 1, element);
    buffers->receive[k] = calloc(elements + 1, element);
  }
}

static void release(const struct Job* job, struct Buffers* buffers) {
  int k;
  for (k = 0; k < job->local; ++k) {
    free(buffers->send[k]);
    free(buffers->receive[k]);
  }
}

/* Stores each local rank's reduction inputs, elements [0, elements). */
static void fill_inputs(const struct Job* job, struct Buffers* buffers, int datatype, int op, size_t elements) {
  int k;
  size_t i;
  for (k = 0; k < job->local; ++k) {
    for (i = 0; i < elements; ++i) {
      store_value(datatype, buffers->send[k], i, reduction_input(datatype, op, job->ranks[k], i));
    }
  }
}

/* Whether `output` holds the reductions of elements [first, first + count). */
static int reduced(int datatype, int op, int size, const void* output, size_t first, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    if (!reduction_matches(datatype, op, load_value(datatype, output, i),
                           reduction_result(datatype, op, size, first + i))) {
      return 0;
    }
  }
  return 1;
}

static void check_reductions(const struct Job* job, int datatype, int op, size_t count, int in_place) {
  size_t element = datatype_size(datatype);
  struct Buffers buffers;
  int k, last = job->size - 1;
  const char* how = in_place ? "in place" : "out of place";
  allocate(job, &buffers, count * (size_t)job->size, element);

  fill_inputs(job, &buffers, datatype, op, count);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclAllReduce(buffers.send[k], in_place ? buffers.send[k] : buffers.receive[k], count, datatype, op,
                          job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    CHECK(reduced(datatype, op, job->size, in_place ? buffers.send[k] : buffers.receive[k], 0, count),
          "ncclAllReduce %s %s %zu %s: rank %d wrong", datatype_name(datatype), op_names[op], count, how,
          job->ranks[k]);
  }

  fill_inputs(job, &buffers, datatype, op, count * (size_t)job->size);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    char* own = buffers.send[k] + (size_t)job->ranks[k] * count * element;
    NCCL_OK(ncclReduceScatter(buffers.send[k], in_place ? own : buffers.receive[k], count, datatype, op, job->comms[k],
                              NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    const char* output = in_place ? buffers.send[k] + (size_t)job->ranks[k] * count * element : buffers.receive[k];
    CHECK(reduced(datatype, op, job->size, output, (size_t)job->ranks[k] * count, count),
          "ncclReduceScatter %s %s %zu %s: rank %d wrong", datatype_name(datatype), op_names[op], count, how,
          job->ranks[k]);
  }

  fill_inputs(job, &buffers, datatype, op, count);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclReduce(buffers.send[k], in_place ? buffers.send[k] : buffers.receive[k], count, datatype, op, last,
                       job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    if (job->ranks[k] != last) continue;
    CHECK(reduced(datatype, op, job->size, in_place ? buffers.send[k] : buffers.receive[k], 0, count),
          "ncclReduce %s %s %zu %s: wrong at the root", datatype_name(datatype), op_names[op], count, how);
  }
  release(job, &buffers);
}

static double moved(int r, size_t i) { return (double)((i * 3 + (size_t)r * 5) % 100); }

/* Whether `data` holds moved(r, first + i) for i in [0, count). */
static int holds(int datatype, const char* data, int r, size_t first, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    if (load_value(datatype, data, i) != round_to(datatype, moved(r, first + i))) return 0;
  }
  return 1;
}

static void check_data_movement(const struct Job* job, int datatype, size_t count) {
  size_t element = datatype_size(datatype), i;
  size_t block = count * element;
  struct Buffers buffers;
  int k, peer, first_root = 1 % job->size, second_root = job->size - 1;
  allocate(job, &buffers, count * (size_t)job->size, element);

  /* ncclBroadcast out of place from one root, then ncclBcast in place from another */
  for (k = 0; k < job->local; ++k) {
    for (i = 0; i < count; ++i) store_value(datatype, buffers.send[k], i, moved(job->ranks[k], i));
  }
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclBroadcast(buffers.send[k], buffers.receive[k], count, datatype, first_root, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    CHECK(holds(datatype, buffers.receive[k], first_root, 0, count), "ncclBroadcast %s %zu: rank %d wrong",
          datatype_name(datatype), count, job->ranks[k]);
    if (job->ranks[k] == second_root) {
      for (i = 0; i < count; ++i) store_value(datatype, buffers.receive[k], i, moved(second_root, i));
    }
  }
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclBcast(buffers.receive[k], count, datatype, second_root, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    CHECK(holds(datatype, buffers.receive[k], second_root, 0, count), "ncclBcast %s %zu: rank %d wrong",
          datatype_name(datatype), count, job->ranks[k]);
  }

  /* ncclAllGather in place: each rank's input is its block of recvbuff */
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    char* own = buffers.receive[k] + (size_t)job->ranks[k] * block;
    for (i = 0; i < count; ++i) store_value(datatype, own, i, moved(job->ranks[k], i));
    NCCL_OK(ncclAllGather(own, buffers.receive[k], count, datatype, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    for (peer = 0; peer < job->size; ++peer) {
      CHECK(holds(datatype, buffers.receive[k] + (size_t)peer * block, peer, 0, count),
            "ncclAllGather %s %zu: rank %d, block %d wrong", datatype_name(datatype), count, job->ranks[k], peer);
    }
  }

  /* all-to-all as NCCL programs write it: grouped sends and receives, to itself too */
  for (k = 0; k < job->local; ++k) {
    for (i = 0; i < count * (size_t)job->size; ++i) store_value(datatype, buffers.send[k], i, moved(job->ranks[k], i));
  }
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    for (peer = 0; peer < job->size; ++peer) {
      NCCL_OK(ncclSend(buffers.send[k] + (size_t)peer * block, count, datatype, peer, job->comms[k], NULL));
      NCCL_OK(ncclRecv(buffers.receive[k] + (size_t)peer * block, count, datatype, peer, job->comms[k], NULL));
    }
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    for (peer = 0; peer < job->size; ++peer) {
      CHECK(holds(datatype, buffers.receive[k] + (size_t)peer * block, peer, (size_t)job->ranks[k] * count, count),
            "grouped all-to-all %s %zu: rank %d, block from %d wrong", datatype_name(datatype), count, job->ranks[k],
            peer);
    }
  }

  /* The same exchange as NCCL 2.28's one call, ncclAlltoAll (torch's all_to_all_single makes it) */
  for (k = 0; k < job->local; ++k) memset(buffers.receive[k], 0, block * (size_t)job->size);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclAlltoAll(buffers.send[k], buffers.receive[k], count, datatype, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    for (peer = 0; peer < job->size; ++peer) {
      CHECK(holds(datatype, buffers.receive[k] + (size_t)peer * block, peer, (size_t)job->ranks[k] * count, count),
            "ncclAlltoAll %s %zu: rank %d, block from %d wrong", datatype_name(datatype), count, job->ranks[k], peer);
    }
  }

  /* NCCL 2.28's ncclGather to one root (each rank's first block), ncclScatter from another */
  for (k = 0; k < job->local; ++k) memset(buffers.receive[k], 0, block * (size_t)job->size);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclGather(buffers.send[k], buffers.receive[k], count, datatype, first_root, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    if (job->ranks[k] != first_root) continue;
    for (peer = 0; peer < job->size; ++peer) {
      CHECK(holds(datatype, buffers.receive[k] + (size_t)peer * block, peer, 0, count),
            "ncclGather %s %zu: root %d, block from %d wrong", datatype_name(datatype), count, first_root, peer);
    }
  }
  for (k = 0; k < job->local; ++k) memset(buffers.receive[k], 0, block * (size_t)job->size);
  NCCL_OK(ncclGroupStart());
  for (k = 0; k < job->local; ++k) {
    NCCL_OK(ncclScatter(buffers.send[k], buffers.receive[k], count, datatype, second_root, job->comms[k], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (k = 0; k < job->local; ++k) {
    CHECK(holds(datatype, buffers.receive[k], second_root, (size_t)job->ranks[k] * count, count),
          "ncclScatter %s %zu: rank %d wrong", datatype_name(datatype), count, job->ranks[k]);
  }
  release(job, &buffers);
}

static void check_every_collective(const struct Job* job) {
  static const size_t counts[] = {0, 1, 1000};
  int datatype, op;
  size_t c;
  for (datatype = 0; datatype < ncclNumTypes; ++datatype) {
    for (c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      for (op = 0; op < ncclNumOps; ++op) {
        check_reductions(job, datatype, op, counts[c], 0);
        check_reductions(job, datatype, op, counts[c], 1);
      }
      check_data_movement(job, datatype, counts[c]);
    }
  }
}

/* Local refusals: no peer is involved, so any rank may try them alone. */
static void check_refusals(ncclComm_t comm) {
  float data[2] = {1, 2};
  void* handle = NULL;
  void* device_memory = NULL;
  ncclRedOp_t made;
  ncclResult_t result;
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE && version == 21903, "ncclGetVersion: %d", version);
  result = ncclAllReduce(data, data, 2, ncclFloat, (ncclRedOp_t)5, comm, NULL);
  CHECK(result == ncclInvalidArgument && strstr(ncclGetLastError(comm), "op") != NULL, "op 5: %s (%s)",
        ncclGetErrorString(result), ncclGetLastError(comm));
  result = ncclAllReduce(data, data, 2, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL);
  CHECK(result == ncclInvalidArgument && strstr(ncclGetLastError(comm), "datatype") != NULL, "datatype 10: %s (%s)",
        ncclGetErrorString(result), ncclGetLastError(comm));
  result = ncclRedOpCreatePreMulSum(&made, data, ncclFloat, ncclScalarHostImmediate, comm);
  CHECK(result == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "pre-multiplied") != NULL,
        "ncclRedOpCreatePreMulSum: %s", ncclGetErrorString(result));
  result = ncclBroadcast(data, data, 2, ncclFloat, 7, comm, NULL); /* libcomm's own check, forwarded */
  CHECK(result == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "root") != NULL, "root 7: %s (%s)",
        ncclGetErrorString(result), ncclGetLastError(NULL));
  NCCL_OK(ncclCommRegister(comm, data, sizeof data, &handle));
  NCCL_OK(ncclCommDeregister(comm, handle));
  NCCL_OK(ncclCommFinalize(comm));
  result = ncclMemAlloc(&device_memory, 1024);
  if (result == ncclSuccess) {
    NCCL_OK(ncclMemFree(device_memory)); /* a machine with a GPU */
  } else {
    CHECK(result == ncclUnhandledCudaError && device_memory == NULL, "ncclMemAlloc without a GPU: %s",
          ncclGetErrorString(result));
  }
  CHECK(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage") == 0, "ncclGetErrorString");
  /* Later NCCLs' calls a program may link: refused by name, never silently. */
  {
    ncclWindow_t window = (ncclWindow_t)data;
    result = ncclCommWindowRegister(comm, data, sizeof data, &window, 0);
    CHECK(result == ncclInvalidUsage && window == NULL && strstr(ncclGetLastError(NULL), "ncclCommWindowRegister"),
          "ncclCommWindowRegister: %s (%s)", ncclGetErrorString(result), ncclGetLastError(NULL));
    result = ncclGroupSimulateEnd(NULL);
    CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclGroupSimulateEnd"),
          "ncclGroupSimulateEnd: %s", ncclGetErrorString(result));
    result = ncclDevCommCreate(comm, NULL, NULL);
    CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclDevCommCreate"),
          "ncclDevCommCreate: %s (%s)", ncclGetErrorString(result), ncclGetLastError(NULL));
    result = ncclDevCommDestroy(comm, NULL);
    CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclDevCommDestroy"),
          "ncclDevCommDestroy: %s (%s)", ncclGetErrorString(result), ncclGetLastError(NULL));
    {
      void* pointer = data;
      uint64_t statistic = 0;
      result = ncclCommSuspend(comm, 1);
      CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclCommSuspend"), "ncclCommSuspend: %s",
            ncclGetErrorString(result));
      result = ncclCommResume(comm);
      CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclCommResume"), "ncclCommResume: %s",
            ncclGetErrorString(result));
      result = ncclCommMemStats(comm, 0, &statistic);
      CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclCommMemStats"), "ncclCommMemStats: %s",
            ncclGetErrorString(result));
      result = ncclWinGetUserPtr(comm, NULL, &pointer);
      CHECK(result == ncclInvalidUsage && pointer == NULL && strstr(ncclGetLastError(NULL), "ncclWinGetUserPtr"),
            "ncclWinGetUserPtr: %s", ncclGetErrorString(result));
      pointer = data;
      result = ncclGetPeerDevicePointer(NULL, 0, 0, &pointer);
      CHECK(result == ncclInvalidUsage && pointer == NULL && strstr(ncclGetLastError(NULL), "ncclGetPeerDevicePointer"),
            "ncclGetPeerDevicePointer: %s", ncclGetErrorString(result));
      result = ncclPutSignal(data, 2, ncclFloat, 0, NULL, 0, 0, 0, 0, comm, NULL);
      CHECK(result == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "ncclPutSignal"), "ncclPutSignal: %s",
            ncclGetErrorString(result));
    }
    result = ncclCommInitRankScalable(NULL, 2, 0, 0, NULL, NULL);
    CHECK(result == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "ncclCommInitRankScalable"),
          "ncclCommInitRankScalable without ids: %s", ncclGetErrorString(result));
  }
}

static int run_clique(void) {
  struct Job job;
  int k;
  ncclResult_t async_error = ncclInternalError;
  job.local = job.size = 3;
  check_rank = 0;
  for (k = 0; k < job.local; ++k) job.ranks[k] = k;
  NCCL_OK(ncclCommInitAll(job.comms, job.size, NULL));
  check_every_collective(&job);
  check_refusals(job.comms[0]);
  NCCL_OK(ncclCommGetAsyncError(job.comms[1], &async_error));
  CHECK(async_error == ncclSuccess, "async error: %s", ncclGetErrorString(async_error));
  for (k = 0; k < job.local; ++k) NCCL_OK(ncclCommDestroy(job.comms[k]));
  return check_summary("drop-in libnccl, one process driving 3 ranks");
}

static int run_process(const char* path) {
  struct Job job;
  ncclUniqueId id;
  ncclComm_t parity;
  int rank = atoi(getenv("RANK")), parity_rank = -1, parity_size = -1;
  double value = rank + 1, result = 0;
  job.local = 1;
  job.size = atoi(getenv("WORLD_SIZE"));
  job.ranks[0] = check_rank = rank;
  share_id(&id, rank, path);
  NCCL_OK(ncclCommInitRank(&job.comms[0], job.size, id, rank));
  check_every_collective(&job);
  check_refusals(job.comms[0]);
  NCCL_OK(ncclCommSplit(job.comms[0], rank % 2, rank, &parity, NULL));
  NCCL_OK(ncclCommUserRank(parity, &parity_rank));
  NCCL_OK(ncclCommCount(parity, &parity_size));
  CHECK(parity_rank == rank / 2 && parity_size == (job.size - rank % 2 + 1) / 2, "split: rank %d of %d", parity_rank,
        parity_size);
  NCCL_OK(ncclAllReduce(&value, &result, 1, ncclDouble, ncclMax, parity, NULL));
  CHECK(result == (double)(job.size - (job.size - 1 - rank % 2) % 2), "all_reduce max on the split: %g", result);
  NCCL_OK(ncclCommDestroy(parity));
  NCCL_OK(ncclAllReduce(&value, &result, 1, ncclDouble, ncclMin, job.comms[0], NULL)); /* all have read the id */
  if (rank == 0) unlink(path);
  NCCL_OK(ncclCommDestroy(job.comms[0]));
  return check_summary("drop-in libnccl, one rank per process");
}

int main(int argc, char** argv) {
  if (getenv("RANK") && getenv("WORLD_SIZE")) {
    if (argc < 2) {
      fprintf(stderr, "under a launcher, name a file for the id: test_nccl_abi PATH\n");
      return 2;
    }
    return run_process(argv[1]);
  }
  return run_clique();
}
