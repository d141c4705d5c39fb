/* An NCCL program (the drop-in's nccl.h, -lnccl) that survives a dead rank: under
 * `commrun --on-failure continue -n 3`, the ranks all_reduce once, rank 2 is killed with
 * SIGKILL, the survivors' next all_reduce fails with ncclRemoteError, and they go on with
 * ncclCommShrink (NCCL_SHRINK_ABORT) and an all_reduce on the two of them.
 *
 *   commrun --on-failure continue -n 3 build/tests/c/test_nccl_shrink /tmp/id-file
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "nccl.h"

#define NCCL_OK(call)                                                                           \
  do {                                                                                          \
    ncclResult_t nccl_result_ = (call);                                                         \
    CHECK(nccl_result_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(nccl_result_), \
          ncclGetLastError(NULL));                                                              \
  } while (0)

static void share_id(ncclUniqueId* id, int rank, const char* path) {
  if (rank == 0) {
    char partial[4200];
    FILE* file;
    snprintf(partial, sizeof partial, "%.4000s.partial", path);
    NCCL_OK(ncclGetUniqueId(id));
    file = fopen(partial, "wb");
    CHECK(file && fwrite(id, sizeof *id, 1, file) == 1 && fclose(file) == 0 && rename(partial, path) == 0,
          "writing the id to %s", path);
  } else {
    struct timespec pause = {0, 10 * 1000 * 1000};
    int waited;
    for (waited = 0; waited < 3000; ++waited) {
      FILE* file = fopen(path, "rb");
      size_t read = file ? fread(id, sizeof *id, 1, file) : 0;
      if (file) fclose(file);
      if (read == 1) return;
      nanosleep(&pause, NULL);
    }
    CHECK(0, "no id in %s after 30 s", path);
  }
}

int main(int argc, char** argv) {
  ncclUniqueId id;
  ncclComm_t comm, shrunk = NULL;
  ncclResult_t result;
  int rank = atoi(getenv("RANK")), size = atoi(getenv("WORLD_SIZE")), new_rank = -1, new_size = 0;
  double value = rank + 1;
  char path[4100];
  CHECK(argc == 2 && size == 3, "usage: commrun --on-failure continue -n 3 test_nccl_shrink ID_FILE");
  if (argc != 2 || size != 3) return check_summary("drop-in libnccl: ncclCommShrink after a kill");
  /* One file per job (commrun picks a free port for each), so no rank reads an earlier job's id. */
  snprintf(path, sizeof path, "%.4000s.%s", argv[1], getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "0");
  share_id(&id, rank, path);
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  NCCL_OK(ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, comm, NULL));
  CHECK(value == 6.0, "the first all_reduce gave %g", value);
  if (rank == 2) raise(SIGKILL);
  value = rank + 1;
  result = ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, comm, NULL);
  CHECK(result == ncclRemoteError, "the all_reduce without rank 2 returned %s", ncclGetErrorString(result));
  CHECK(strstr(ncclGetLastError(comm), "rank 2") != NULL, "the error does not name rank 2: %s", ncclGetLastError(comm));
  result = ncclCommShrink(comm, NULL, 0, &shrunk, NULL, 7);
  CHECK(result == ncclInvalidArgument, "an unknown shrink flag gave %s", ncclGetErrorString(result));
  NCCL_OK(ncclCommShrink(comm, NULL, 0, &shrunk, NULL, NCCL_SHRINK_ABORT));
  NCCL_OK(ncclCommCount(shrunk, &new_size));
  NCCL_OK(ncclCommUserRank(shrunk, &new_rank));
  CHECK(new_size == 2 && new_rank == rank, "rank %d is %d of %d after the shrink", rank, new_rank, new_size);
  value = rank + 1;
  NCCL_OK(ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, shrunk, NULL));
  CHECK(value == 3.0, "the survivors' all_reduce gave %g, not 1 + 2", value);
  printf("[rank %d] after rank 2 was killed: ncclCommShrink -> rank %d of %d, all_reduce %g\n", rank, new_rank,
         new_size, value);
  NCCL_OK(ncclCommDestroy(shrunk));
  NCCL_OK(ncclCommDestroy(comm));
  if (rank == 0) unlink(path);
  return check_summary("drop-in libnccl: ncclCommShrink after a kill");
}
