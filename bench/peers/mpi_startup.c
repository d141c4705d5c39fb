/* mpi_startup: Open MPI's side of bench/scale_startup.py, the same steps as
 * bench/startup_probe.cpp: MPI_Init, one MPI_Allreduce (checked), the sockets and threads this
 * process holds, one line per rank. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int count_entries(const char* folder, int sockets_only) {
  DIR* directory = opendir(folder);
  if (!directory) return -1;
  int count = 0;
  struct dirent* entry;
  while ((entry = readdir(directory))) {
    if (entry->d_name[0] == '.') continue;
    if (sockets_only) {
      char path[512], target[64] = {0};
      snprintf(path, sizeof path, "%s/%s", folder, entry->d_name);
      if (readlink(path, target, sizeof target - 1) <= 0 || strncmp(target, "socket:", 7) != 0) continue;
    }
    ++count;
  }
  closedir(directory);
  return count;
}

int main(int argc, char** argv) {
  double start = now();
  MPI_Init(&argc, &argv);
  double init_s = now() - start;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double value = rank + 1, sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double first_s = now() - start;
  int sockets = count_entries("/proc/self/fd", 1), threads = count_entries("/proc/self/task", 0);
  MPI_Barrier(MPI_COMM_WORLD);
  int correct = sum == (double)size * (size + 1) / 2;
  printf("probe rank=%d size=%d init_s=%.4f first_collective_s=%.4f sockets=%d threads=%d correct=%d\n", rank, size,
         init_s, first_s, sockets, threads, correct);
  MPI_Finalize();
  return correct ? 0 : 1;
}
