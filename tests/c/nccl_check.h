/* What the NCCL-shaped test programs share: a check of an NCCL call that prints its error, and
 * rank 0's ncclGetUniqueId handed to the other processes through a file, as an MPI program would
 * broadcast it. Include after c_check.h and nccl.h. C99. */
#ifndef COMM_TESTS_NCCL_CHECK_H
#define COMM_TESTS_NCCL_CHECK_H

#include <stdio.h>
#include <time.h>

#define NCCL_OK(call)                                                                           \
  do {                                                                                          \
    ncclResult_t nccl_result_ = (call);                                                         \
    CHECK(nccl_result_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(nccl_result_), \
          ncclGetLastError(NULL));                                                              \
  } while (0)

/* Rank 0 writes a fresh id to `path` (whole, through a rename); the others wait for it. */
static inline void share_id(ncclUniqueId* id, int rank, const char* path) {
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

#endif
