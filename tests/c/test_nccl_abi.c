/* A program written for NCCL, built against the drop-in nccl.h and linked with -lnccl from the
 * build (libcomm's libnccl.so.2), on host buffers.
 *
 * Run alone, it drives three ranks from one thread, as NCCL programs drive several GPUs:
 * ncclCommInitAll, then every collective NCCL 2.19 has with every ncclDataType_t and (for the
 * reductions) every ncclRedOp_t, each as one group over the three communicators, in and out of
 * place, against references computed in double; an all-to-all as grouped ncclSend/ncclRecv to
 * every rank, itself included; and what libcomm refuses or accepts without effect (operators
 * made at run time, libcomm's own datatypes and ops, registration, ncclMemAlloc without a GPU).
 *
 * Under commrun (RANK set), each process is one rank: rank 0's ncclGetUniqueId goes to the others
 * through the file named on the command line, then ncclCommInitRank, an all_reduce, and
 * ncclCommSplit by parity.
 *
 *   build/tests/c/test_nccl_abi
 *   commrun -n 3 build/tests/c/test_nccl_abi /tmp/id-file
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "nccl.h"

#define RANKS 3

#define NCCL_OK(call)                                                                           \
  do {                                                                                          \
    ncclResult_t nccl_result_ = (call);                                                         \
    CHECK(nccl_result_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(nccl_result_), \
          ncclGetLastError(NULL));                                                              \
  } while (0)

static const char* const op_names[] = {"sum", "prod", "max", "min", "avg"};

/* Every rank's reduction, through one group over the clique; in place or not. */
static void check_reductions(ncclComm_t* comms, int datatype, int op, size_t count, int in_place) {
  size_t element = datatype_size(datatype), i;
  void* send[RANKS];
  void* receive[RANKS];
  int r;
  for (r = 0; r < RANKS; ++r) {
    send[r] = calloc(count * RANKS + 1, element);
    receive[r] = calloc(count * RANKS + 1, element);
    for (i = 0; i < count * RANKS; ++i) store_value(datatype, send[r], i, reduction_input(datatype, op, r, i));
  }
  /* all_reduce, and reduce to the last rank */
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) {
    NCCL_OK(ncclAllReduce(send[r], in_place ? send[r] : receive[r], count, (ncclDataType_t)datatype, (ncclRedOp_t)op,
                          comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count; ++i) {
      double got = load_value(datatype, in_place ? send[r] : receive[r], i);
      double want = reduction_result(datatype, op, RANKS, i);
      if (!reduction_matches(datatype, op, got, want)) {
        CHECK(0, "ncclAllReduce %s %s %zu: rank %d [%zu] = %g, expected %g", datatype_name(datatype), op_names[op],
              count, r, i, got, want);
        break;
      }
    }
  }
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count * RANKS; ++i) store_value(datatype, send[r], i, reduction_input(datatype, op, r, i));
  }
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) {
    NCCL_OK(ncclReduceScatter(send[r], in_place ? (char*)send[r] + (size_t)r * count * element : receive[r], count,
                              (ncclDataType_t)datatype, (ncclRedOp_t)op, comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < RANKS; ++r) {
    const void* output = in_place ? (char*)send[r] + (size_t)r * count * element : receive[r];
    for (i = 0; i < count; ++i) {
      double got = load_value(datatype, output, i);
      double want = reduction_result(datatype, op, RANKS, (size_t)r * count + i);
      if (!reduction_matches(datatype, op, got, want)) {
        CHECK(0, "ncclReduceScatter %s %s %zu: rank %d [%zu] = %g, expected %g", datatype_name(datatype), op_names[op],
              count, r, i, got, want);
        break;
      }
    }
  }
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count; ++i) store_value(datatype, send[r], i, reduction_input(datatype, op, r, i));
  }
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) {
    NCCL_OK(ncclReduce(send[r], in_place ? send[r] : receive[r], count, (ncclDataType_t)datatype, (ncclRedOp_t)op,
                       RANKS - 1, comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (i = 0; i < count; ++i) {
    double got = load_value(datatype, in_place ? send[RANKS - 1] : receive[RANKS - 1], i);
    if (!reduction_matches(datatype, op, got, reduction_result(datatype, op, RANKS, i))) {
      CHECK(0, "ncclReduce %s %s %zu: [%zu] = %g", datatype_name(datatype), op_names[op], count, i, got);
      break;
    }
  }
  for (r = 0; r < RANKS; ++r) {
    free(send[r]);
    free(receive[r]);
  }
}

static double moved(int r, size_t i) { return (double)((i * 3 + (size_t)r * 5) % 100); }

static void check_data_movement(ncclComm_t* comms, int datatype, size_t count) {
  size_t element = datatype_size(datatype), i;
  char* send[RANKS];
  char* receive[RANKS];
  int r, peer;
  for (r = 0; r < RANKS; ++r) {
    send[r] = calloc(count * RANKS + 1, element);
    receive[r] = calloc(count * RANKS + 1, element);
  }
  /* ncclBroadcast from rank 1 (out of place), then ncclBcast from rank 2 (in place) */
  for (i = 0; i < count; ++i) store_value(datatype, send[1], i, moved(1, i));
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) NCCL_OK(ncclBroadcast(send[r], receive[r], count, datatype, 1, comms[r], NULL));
  NCCL_OK(ncclGroupEnd());
  for (i = 0; i < count; ++i) store_value(datatype, receive[2], i, moved(2, i));
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) NCCL_OK(ncclBcast(receive[r], count, datatype, 2, comms[r], NULL));
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count; ++i) {
      if (load_value(datatype, receive[r], i) != round_to(datatype, moved(2, i))) {
        CHECK(0, "ncclBcast %s %zu: rank %d wrong at %zu", datatype_name(datatype), count, r, i);
        break;
      }
    }
  }
  /* ncclAllGather in place: each rank's input is its block of recvbuff */
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) {
    char* own = receive[r] + (size_t)r * count * element;
    for (i = 0; i < count; ++i) store_value(datatype, own, i, moved(r, i));
    NCCL_OK(ncclAllGather(own, receive[r], count, datatype, comms[r], NULL));
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count * RANKS; ++i) {
      if (load_value(datatype, receive[r], i) != round_to(datatype, moved((int)(i / count), i % count))) {
        CHECK(0, "ncclAllGather %s %zu: rank %d wrong at %zu", datatype_name(datatype), count, r, i);
        break;
      }
    }
  }
  /* all-to-all as NCCL programs write it: grouped sends and receives, to itself too */
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < count * RANKS; ++i) store_value(datatype, send[r], i, moved(r, i));
  }
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < RANKS; ++r) {
    for (peer = 0; peer < RANKS; ++peer) {
      NCCL_OK(ncclSend(send[r] + (size_t)peer * count * element, count, datatype, peer, comms[r], NULL));
      NCCL_OK(ncclRecv(receive[r] + (size_t)peer * count * element, count, datatype, peer, comms[r], NULL));
    }
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < RANKS; ++r) {
    for (peer = 0; peer < RANKS; ++peer) {
      for (i = 0; i < count; ++i) {
        double got = load_value(datatype, receive[r] + (size_t)peer * count * element, i);
        if (got != round_to(datatype, moved(peer, (size_t)r * count + i))) {
          CHECK(0, "grouped all-to-all %s %zu: rank %d, block from %d wrong at %zu", datatype_name(datatype), count, r,
                peer, i);
          break;
        }
      }
    }
  }
  for (r = 0; r < RANKS; ++r) {
    free(send[r]);
    free(receive[r]);
  }
}

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
}

static int run_clique(void) {
  ncclComm_t comms[RANKS];
  static const size_t counts[] = {0, 1, 1000};
  int datatype, op, r;
  size_t c;
  ncclResult_t async_error = ncclInternalError;
  check_rank = 0;
  NCCL_OK(ncclCommInitAll(comms, RANKS, NULL));
  for (datatype = 0; datatype < ncclNumTypes; ++datatype) {
    for (c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      for (op = 0; op < ncclNumOps; ++op) {
        check_reductions(comms, datatype, op, counts[c], 0);
        check_reductions(comms, datatype, op, counts[c], 1);
      }
      check_data_movement(comms, datatype, counts[c]);
    }
  }
  check_refusals(comms[0]);
  NCCL_OK(ncclCommGetAsyncError(comms[1], &async_error));
  CHECK(async_error == ncclSuccess, "async error: %s", ncclGetErrorString(async_error));
  for (r = 0; r < RANKS; ++r) NCCL_OK(ncclCommDestroy(comms[r]));
  return check_summary("drop-in libnccl, one process driving 3 ranks");
}

/* One rank per process: the id through a file, as an MPI program would broadcast it. */
static int run_process(const char* path) {
  int rank = atoi(getenv("RANK")), size = atoi(getenv("WORLD_SIZE")), parity_rank = -1, parity_size = -1;
  ncclUniqueId id;
  ncclComm_t comm, parity;
  double value = rank + 1, sum = 0;
  int waited;
  check_rank = rank;
  if (rank == 0) {
    char partial[4200];
    FILE* file;
    snprintf(partial, sizeof partial, "%.4000s.partial", path);
    NCCL_OK(ncclGetUniqueId(&id));
    file = fopen(partial, "wb");
    CHECK(file && fwrite(&id, sizeof id, 1, file) == 1 && fclose(file) == 0 && rename(partial, path) == 0,
          "writing the id to %s", path);
  } else {
    struct timespec pause = {0, 10 * 1000 * 1000};
    for (waited = 0; waited < 3000; ++waited) {
      FILE* file = fopen(path, "rb");
      size_t read = file ? fread(&id, sizeof id, 1, file) : 0;
      if (file) fclose(file);
      if (read == 1) break;
      nanosleep(&pause, NULL);
    }
  }
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  NCCL_OK(ncclAllReduce(&value, &sum, 1, ncclDouble, ncclSum, comm, NULL));
  CHECK(sum == size * (size + 1) / 2, "ncclAllReduce across processes: %g", sum);
  NCCL_OK(ncclCommSplit(comm, rank % 2, rank, &parity, NULL));
  NCCL_OK(ncclCommUserRank(parity, &parity_rank));
  NCCL_OK(ncclCommCount(parity, &parity_size));
  CHECK(parity_rank == rank / 2 && parity_size == (size - rank % 2 + 1) / 2, "split: rank %d of %d", parity_rank,
        parity_size);
  NCCL_OK(ncclAllReduce(&value, &sum, 1, ncclDouble, ncclMax, parity, NULL));
  NCCL_OK(ncclCommDestroy(parity));
  NCCL_OK(ncclAllReduce(&value, &sum, 1, ncclDouble, ncclMin, comm, NULL)); /* everyone has read the id */
  if (rank == 0) unlink(path);
  NCCL_OK(ncclCommDestroy(comm));
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
