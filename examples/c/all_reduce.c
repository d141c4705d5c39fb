/* all_reduce.c: a C program in NCCL's style on libcomm's C API (comm/comm.h). Rank 0 makes a
 * unique id and hands its bytes to the other ranks, here through a file (an MPI program would
 * MPI_Bcast them); every rank makes its communicator with comm_init_rank, sums a vector with
 * comm_all_reduce, checks the sum, and destroys the communicator. Every call's result is
 * checked, and a failure prints libcomm's message for it.
 *
 *   commrun -n 4 build/examples/c/all_reduce          (commrun sets RANK and WORLD_SIZE)
 *   cc -std=c99 all_reduce.c $(pkg-config --cflags --libs comm) -o all_reduce
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <comm/comm.h>

#define CHECK_COMM(call)                                                                                          \
  do {                                                                                                            \
    comm_result_t result_ = (call);                                                                               \
    if (result_ != COMM_SUCCESS) {                                                                                \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, comm_get_error_string(result_), comm_get_last_error(NULL)); \
      exit(1);                                                                                                    \
    }                                                                                                             \
  } while (0)

static int environment_int(const char* name) {
  const char* text = getenv(name);
  if (!text) {
    fprintf(stderr, "%s is not set: start this program with commrun (or set RANK and WORLD_SIZE)\n", name);
    exit(1);
  }
  return atoi(text);
}

/* The id carries the job's secret: only this user may read it, and a name in a shared directory
 * such as /tmp must not be redirectable. Rank 0 creates a fresh file (never following a symlink,
 * failing if anything is there), readable by its owner only, and renames it into place; the
 * others read only a regular file of their own user that no one else may read. */
static void share_id(comm_unique_id* id, int rank, const char* path) {
  if (rank == 0) {
    char* temporary = malloc(strlen(path) + sizeof ".partial");
    int fd;
    FILE* file = NULL;
    strcpy(temporary, path);
    strcat(temporary, ".partial");
    fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) file = fdopen(fd, "wb");
    if (!file || fwrite(id, sizeof *id, 1, file) != 1 || fclose(file) != 0 || rename(temporary, path) != 0) {
      perror(temporary);
      fprintf(stderr, "rank 0: could not write the id to %s (something there already? remove it)\n", temporary);
      exit(1);
    }
    free(temporary);
  } else {
    struct timespec pause = {0, 10 * 1000 * 1000};
    int waited;
    for (waited = 0; waited < 3000; ++waited) { /* 30 s */
      int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        struct stat status;
        ssize_t read_bytes = -1;
        if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_uid == geteuid() &&
            (status.st_mode & 077) == 0) {
          read_bytes = read(fd, id, sizeof *id);
        } else {
          fprintf(stderr, "rank %d: refusing %s: not a file of this user that only this user can read\n", rank, path);
          exit(1);
        }
        close(fd);
        if (read_bytes == (ssize_t)sizeof *id) return;
      }
      nanosleep(&pause, NULL);
    }
    fprintf(stderr, "rank %d: no id appeared in %s within 30 s\n", rank, path);
    exit(1);
  }
}

int main(int argc, char** argv) {
  int rank = environment_int("RANK"), size = environment_int("WORLD_SIZE");
  const char* port = getenv("MASTER_PORT");
  char path[4096];
  comm_unique_id id;
  comm_t comm;
  size_t count = 1 << 20, i;
  float* data;
  int wrong = 0;

  /* One file per job: commrun gives each job its own MASTER_PORT. */
  snprintf(path, sizeof path, "%s", argc > 1 ? argv[1] : "");
  if (argc < 2) snprintf(path, sizeof path, "/tmp/comm-c-example-id.%s", port ? port : "0");
  if (rank == 0) CHECK_COMM(comm_get_unique_id(&id));
  share_id(&id, rank, path);
  CHECK_COMM(comm_init_rank(&comm, size, id, rank));

  data = malloc(count * sizeof *data);
  for (i = 0; i < count; ++i) data[i] = (float)(rank + 1);
  CHECK_COMM(comm_all_reduce(data, data, count, COMM_FLOAT32, COMM_SUM, comm, NULL));
  for (i = 0; i < count; ++i) wrong += data[i] != (float)(size * (size + 1) / 2);
  printf("rank %d of %d: all_reduce of %zu floats: %s (each %g)\n", rank, size, count, wrong ? "WRONG" : "right",
         data[0]);

  CHECK_COMM(comm_barrier(comm, NULL)); /* everyone has read the id: rank 0 may remove it */
  if (rank == 0) unlink(path);
  CHECK_COMM(comm_destroy(comm));
  free(data);
  return wrong ? 1 : 0;
}
