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
#include "nccl_check.h"

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
