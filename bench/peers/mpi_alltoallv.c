/* Open MPI's MPI_Alltoallv with the skew of libcomm's all_to_all_v_perf: rank 0 sends 8 blocks'
 * worth to each rank, the others one block each; a block is `block` floats. Prints, from rank 0,
 * one line per total: "total_bytes,time_us_p50" (median of the iterations, after warm-ups).
 *
 *   mpicc -O2 -o mpi_alltoallv mpi_alltoallv.c
 *   mpirun -np 4 ./mpi_alltoallv 1048576 16777216      (totals: bytes all ranks send together)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int rank, size, a, r, i;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (a = 1; a < argc; ++a) {
    long total = atol(argv[a]);
    /* total = size * block * (size + 7) floats' bytes: rank 0 sends 8 * block to each rank. */
    long block = total / 4 / ((long)size * (size + 7));
    int *sendcounts = malloc(sizeof(int) * size), *recvcounts = malloc(sizeof(int) * size);
    int *sdispls = malloc(sizeof(int) * size), *rdispls = malloc(sizeof(int) * size);
    long sent = 0, received = 0;
    int iterations = total >= (8 << 20) ? 30 : 200, warmups = 5;
    double* times = malloc(sizeof(double) * iterations);
    float *input, *output;
    for (r = 0; r < size; ++r) {
      sendcounts[r] = (int)((rank == 0 ? 8 : 1) * block);
      recvcounts[r] = (int)((r == 0 ? 8 : 1) * block);
      sdispls[r] = (int)sent;
      rdispls[r] = (int)received;
      sent += sendcounts[r];
      received += recvcounts[r];
    }
    input = malloc(sizeof(float) * (sent + 1));
    output = malloc(sizeof(float) * (received + 1));
    for (i = 0; i < sent; ++i) input[i] = (float)(rank * 1000 + i % 97);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmups + iterations; ++i) { /* back to back, as libcomm's bench times them */
      double start = MPI_Wtime();
      MPI_Alltoallv(input, sendcounts, sdispls, MPI_FLOAT, output, recvcounts, rdispls, MPI_FLOAT, MPI_COMM_WORLD);
      if (i >= warmups) times[i - warmups] = (MPI_Wtime() - start) * 1e6;
    }
    qsort(times, iterations, sizeof(double), compare);
    if (rank == 0) printf("%ld,%.2f\n", total, times[iterations / 2]);
    free(sendcounts), free(recvcounts), free(sdispls), free(rdispls), free(times), free(input), free(output);
  }
  MPI_Finalize();
  return 0;
}
