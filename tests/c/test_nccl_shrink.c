/* An NCCL program (the drop-in's nccl.h, -lnccl) that survives a dead rank and grows back: under
 * `commrun --restart 1 -n 3`, the ranks all_reduce once, rank 2 is killed with SIGKILL, the
 * survivors' next all_reduce fails with ncclRemoteError, they go on with ncclCommShrink
 * (NCCL_SHRINK_ABORT) and an all_reduce on the two of them, then grow back to three with
 * ncclCommGrow: rank 0 hands ncclCommGetUniqueId's id to the replacement commrun started (through
 * a file, as an MPI program would broadcast it), which joins as rank 2.
 *
 *   commrun --restart 1 -n 3 build/tests/c/test_nccl_shrink /tmp/id-file
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "nccl.h"
#include "nccl_check.h"

/* The replacement: joins the grown communicator as its rank 2, with the id rank 0 wrote. */
static int run_replacement(const char* path) {
  ncclUniqueId id;
  ncclComm_t grown = NULL;
  int grown_rank = -1;
  double value = 3;
  share_id(&id, 1, path); /* as a non-zero rank: waits for the file */
  NCCL_OK(ncclCommGrow(NULL, 3, &id, 2, &grown, NULL));
  NCCL_OK(ncclCommUserRank(grown, &grown_rank));
  NCCL_OK(ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, grown, NULL));
  CHECK(grown_rank == 2 && value == 6.0, "the replacement is rank %d with sum %g", grown_rank, value);
  printf("[replacement] joined as rank %d of 3, all_reduce %g\n", grown_rank, value);
  NCCL_OK(ncclCommDestroy(grown));
  return check_summary("drop-in libnccl: ncclCommGrow, the newcomer");
}

int main(int argc, char** argv) {
  ncclUniqueId id, grow_id;
  ncclComm_t comm, shrunk = NULL, grown = NULL;
  char grow_path[4200];
  ncclResult_t result;
  int rank = atoi(getenv("RANK")), size = atoi(getenv("WORLD_SIZE")), new_rank = -1, new_size = 0;
  double value = rank + 1;
  char path[4100];
  CHECK(argc == 2 && size == 3, "usage: commrun --on-failure continue -n 3 test_nccl_shrink ID_FILE");
  if (argc != 2 || size != 3) return check_summary("drop-in libnccl: ncclCommShrink after a kill");
  /* One file per job (commrun picks a free port for each), so no rank reads an earlier job's id. */
  snprintf(path, sizeof path, "%.4000s.%s", argv[1], getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "0");
  snprintf(grow_path, sizeof grow_path, "%.4100s.grow", path);
  if (getenv("COMM_REPLACEMENT")) return run_replacement(grow_path);
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
  /* Back to three: rank 0 hands the grow id to the replacement. */
  if (rank == 0) {
    FILE* file;
    char partial[4300];
    NCCL_OK(ncclCommGetUniqueId(shrunk, &grow_id));
    snprintf(partial, sizeof partial, "%.4200s.partial", grow_path);
    file = fopen(partial, "wb");
    CHECK(
        file && fwrite(&grow_id, sizeof grow_id, 1, file) == 1 && fclose(file) == 0 && rename(partial, grow_path) == 0,
        "writing the grow id to %s", grow_path);
  }
  NCCL_OK(ncclCommGrow(shrunk, 3, rank == 0 ? &grow_id : NULL, -1, &grown, NULL));
  value = rank + 1;
  NCCL_OK(ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, grown, NULL));
  CHECK(value == 6.0, "the grown all_reduce gave %g, not 1 + 2 + 3", value);
  printf("[rank %d] grown back to 3: all_reduce %g\n", rank, value);
  NCCL_OK(ncclCommDestroy(grown));
  NCCL_OK(ncclCommDestroy(shrunk));
  NCCL_OK(ncclCommDestroy(comm));
  if (rank == 0) {
    unlink(path);
    unlink(grow_path);
  }
  return check_summary("drop-in libnccl: ncclCommShrink after a kill");
}
