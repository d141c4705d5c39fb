/* Open MPI's uneven collectives with the skew of libcomm's *_v_perf benches: rank 0 brings 8
 * blocks' worth, the others one block; a block is floats. Prints, from rank 0, one line per
 * total: "total_bytes,time_us_p50" (median of the iterations, after warm-ups).
 *
 *   alltoallv:  MPI_Alltoallv, rank 0 sends 8 blocks to each rank; the total is what all ranks
 *               send together (size * (size + 7) blocks).
 *   allgatherv: MPI_Allgatherv, rank 0 brings 8 blocks; the total is what every rank ends with
 *               (size + 7 blocks).
 *
 *   mpicc -O2 -o mpi_v_forms mpi_v_forms.c
 *   mpirun -np 4 ./mpi_v_forms alltoallv 1048576 16777216
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int heavy(int rank) { return rank == 0 ? 8 : 1; }

int main(int argc, char** argv) {
  int rank, size, a, r, i, all_to_all;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2 || (strcmp(argv[1], "alltoallv") != 0 && strcmp(argv[1], "allgatherv") != 0)) {
    if (rank == 0) fprintf(stderr, "usage: mpi_v_forms alltoallv|allgatherv TOTAL...\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  all_to_all = strcmp(argv[1], "alltoallv") == 0;
  for (a = 2; a < argc; ++a) {
    long total = atol(argv[a]);
    long block = total / 4 / ((all_to_all ? (long)size : 1) * (size + 7));
    int *sendcounts = malloc(sizeof(int) * size), *recvcounts = malloc(sizeof(int) * size);
    int *sdispls = malloc(sizeof(int) * size), *rdispls = malloc(sizeof(int) * size);
    long sent = 0, received = 0;
    int iterations = total >= (8 << 20) ? 30 : 200, warmups = 5;
    double* times = malloc(sizeof(double) * iterations);
    float *input, *output;
    for (r = 0; r < size; ++r) {
      sendcounts[r] = (int)(heavy(all_to_all ? rank : r) * block);  /* allgatherv: counts of every rank */
      recvcounts[r] = (int)(heavy(r) * block);
      sdispls[r] = (int)sent;
      rdispls[r] = (int)received;
      sent += sendcounts[r];
      received += recvcounts[r];
    }
    if (!all_to_all) sent = sendcounts[rank];
    input = malloc(sizeof(float) * (sent + 1));
    output = malloc(sizeof(float) * (received + 1));
    for (i = 0; i < sent; ++i) input[i] = (float)(rank * 1000 + i % 97);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmups + iterations; ++i) { /* back to back, as libcomm's bench times them */
      double start = MPI_Wtime();
      if (all_to_all) {
        MPI_Alltoallv(input, sendcounts, sdispls, MPI_FLOAT, output, recvcounts, rdispls, MPI_FLOAT, MPI_COMM_WORLD);
      } else {
        MPI_Allgatherv(input, (int)sent, MPI_FLOAT, output, recvcounts, rdispls, MPI_FLOAT, MPI_COMM_WORLD);
      }
      if (i >= warmups) times[i - warmups] = (MPI_Wtime() - start) * 1e6;
    }
    qsort(times, iterations, sizeof(double), compare);
    if (rank == 0) printf("%ld,%.2f\n", total, times[iterations / 2]);
    free(sendcounts), free(recvcounts), free(sdispls), free(rdispls), free(times), free(input), free(output);
  }
  MPI_Finalize();
  return 0;
}
