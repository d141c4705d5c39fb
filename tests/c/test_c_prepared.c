/* Persistent collectives of comm/comm.h (comm_<collective>_init, comm_prepared_run,
 * comm_prepared_free): each prepared collective run several times with new contents in the same
 * buffers gives what a reference computed here in double gives, out of place and in place;
 * runs mix with the ordinary calls (rank 0 makes every other all_reduce the ordinary way) and
 * with groups; a NULL handle, a NULL result pointer and preparing inside a group are refused.
 *
 *   commrun -n 3 build/tests/c/test_c_prepared
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

static int rank, size;
static comm_t comm;

/* Rank r's element i in run `run`: small integers, exact in every datatype used here. */
static double input(int r, int run, size_t i) { return (double)((r + 1) * 10 + run * 3 + (int)(i % 7)); }

static double sum_over_ranks(int run, size_t i) {
  double total = 0;
  int r;
  for (r = 0; r < size; ++r) total += input(r, run, i);
  return total;
}

static void check_all_reduce(size_t count, int in_place) {
  double* send = calloc(count, sizeof(double));
  double* receive = calloc(count, sizeof(double));
  double* input_buffer = in_place ? receive : send;
  comm_prepared_t prepared = NULL;
  int run;
  size_t i;
  CHECK_OK(comm_all_reduce_init(input_buffer, receive, count, COMM_FLOAT64, COMM_SUM, comm, &prepared));
  for (run = 0; run < 5; ++run) {
    long wrong = -1;
    for (i = 0; i < count; ++i) input_buffer[i] = input(rank, run, i);
    if (rank == 0 && run % 2 == 1) {
      CHECK_OK(comm_all_reduce(input_buffer, receive, count, COMM_FLOAT64, COMM_SUM, comm, NULL));
    } else {
      CHECK_OK(comm_prepared_run(prepared, NULL));
    }
    for (i = 0; i < count && wrong < 0; ++i) {
      if (receive[i] != sum_over_ranks(run, i)) wrong = (long)i;
    }
    CHECK(wrong < 0, "all_reduce (%s, count %zu) run %d: element %ld is %g, not %g", in_place ? "in place" : "out of place",
          count, run, wrong, wrong < 0 ? 0.0 : receive[wrong], wrong < 0 ? 0.0 : sum_over_ranks(run, (size_t)wrong));
  }
  CHECK_OK(comm_prepared_free(prepared));
  free(send);
  free(receive);
}

static void check_data_movement(size_t count) {
  int32_t* one = calloc(count, sizeof(int32_t));
  int32_t* all = calloc(count * (size_t)size, sizeof(int32_t));
  int32_t* scattered = calloc(count, sizeof(int32_t));
  int32_t* to_all = calloc(count * (size_t)size, sizeof(int32_t));
  int32_t* from_all = calloc(count * (size_t)size, sizeof(int32_t));
  comm_prepared_t broadcast = NULL, all_gather = NULL, reduce_scatter = NULL, all_to_all = NULL, barrier = NULL;
  int root = size - 1, run, r;
  size_t i;
  CHECK_OK(comm_broadcast_init(one, one, count, COMM_INT32, root, comm, &broadcast));
  CHECK_OK(comm_all_gather_init(one, all, count, COMM_INT32, comm, &all_gather));
  CHECK_OK(comm_reduce_scatter_init(all, scattered, count, COMM_INT32, COMM_SUM, comm, &reduce_scatter));
  CHECK_OK(comm_all_to_all_init(to_all, from_all, count, COMM_INT32, comm, &all_to_all));
  CHECK_OK(comm_barrier_init(comm, &barrier));
  for (run = 0; run < 4; ++run) {
    int right = 1;
    for (i = 0; i < count; ++i) one[i] = rank == root ? (int32_t)input(root, run, i) : -1;
    CHECK_OK(comm_prepared_run(broadcast, NULL));
    for (i = 0; i < count; ++i) right = right && one[i] == (int32_t)input(root, run, i);
    CHECK(right, "broadcast run %d", run);

    for (i = 0; i < count; ++i) one[i] = (int32_t)input(rank, run, i);
    CHECK_OK(comm_prepared_run(all_gather, NULL));
    for (r = 0; r < size; ++r)
      for (i = 0; i < count; ++i) right = right && all[(size_t)r * count + i] == (int32_t)input(r, run, i);
    CHECK(right, "all_gather run %d", run);

    /* all now holds block r = rank r's input on every rank: block `rank` sums to size * it. */
    CHECK_OK(comm_prepared_run(reduce_scatter, NULL));
    for (i = 0; i < count; ++i) right = right && scattered[i] == (int32_t)(size * input(rank, run, i));
    CHECK(right, "reduce_scatter run %d", run);

    for (r = 0; r < size; ++r)
      for (i = 0; i < count; ++i) to_all[(size_t)r * count + i] = (int32_t)(input(rank, run, i) * 100 + r);
    /* Inside a group: issued at its end, with an ordinary barrier beside it. */
    CHECK_OK(comm_group_start());
    CHECK_OK(comm_prepared_run(all_to_all, NULL));
    CHECK_OK(comm_group_end());
    for (r = 0; r < size; ++r)
      for (i = 0; i < count; ++i)
        right = right && from_all[(size_t)r * count + i] == (int32_t)(input(r, run, i) * 100 + rank);
    CHECK(right, "all_to_all run %d", run);
    CHECK_OK(comm_prepared_run(barrier, NULL));
  }
  CHECK_OK(comm_prepared_free(broadcast));
  CHECK_OK(comm_prepared_free(all_gather));
  CHECK_OK(comm_prepared_free(reduce_scatter));
  CHECK_OK(comm_prepared_free(all_to_all));
  CHECK_OK(comm_prepared_free(barrier));
  free(one);
  free(all);
  free(scattered);
  free(to_all);
  free(from_all);
}

/* The uneven forms prepared: rank r's block (r + 1) * count elements, the counts arrays
 * overwritten after _init (they are read there), four runs with new contents. */
static void check_uneven(size_t count) {
  size_t* counts_of_ranks = calloc((size_t)size, sizeof(size_t));
  size_t* at = calloc((size_t)size, sizeof(size_t));
  size_t total = 0, mine, i;
  int32_t *own, *everyone, *reduced, *to_each, *from_each;
  comm_prepared_t all_gather_v = NULL, reduce_scatter_v = NULL, all_to_all_v = NULL, gather_v = NULL,
                  scatter_v = NULL;
  int root = 0, run, r;
  for (r = 0; r < size; ++r) {
    at[r] = total;
    counts_of_ranks[r] = (size_t)(r + 1) * count;
    total += counts_of_ranks[r];
  }
  mine = counts_of_ranks[rank];
  own = calloc(mine + 1, sizeof(int32_t));
  everyone = calloc(total + 1, sizeof(int32_t));
  reduced = calloc(mine + 1, sizeof(int32_t));
  /* all_to_all_v: mine elements to every rank, from rank r its count. */
  to_each = calloc(mine * (size_t)size + 1, sizeof(int32_t));
  from_each = calloc(total + 1, sizeof(int32_t));
  {
    size_t* sends = calloc((size_t)size, sizeof(size_t));
    for (r = 0; r < size; ++r) sends[r] = mine;
    CHECK_OK(comm_all_to_all_v_init(to_each, sends, from_each, counts_of_ranks, COMM_INT32, comm, &all_to_all_v));
    free(sends);
  }
  CHECK_OK(comm_all_gather_v_init(own, mine, everyone, counts_of_ranks, COMM_INT32, comm, &all_gather_v));
  CHECK_OK(comm_reduce_scatter_v_init(everyone, reduced, counts_of_ranks, COMM_INT32, COMM_SUM, comm,
                                      &reduce_scatter_v));
  CHECK_OK(comm_gather_v_init(own, mine, rank == root ? everyone : NULL, counts_of_ranks, COMM_INT32, root, comm,
                              &gather_v));
  CHECK_OK(comm_scatter_v_init(rank == root ? everyone : NULL, counts_of_ranks, own, mine, COMM_INT32, root, comm,
                               &scatter_v));
  for (r = 0; r < size; ++r) counts_of_ranks[r] = 12345; /* read at _init: changing them changes nothing */
  for (run = 0; run < 4; ++run) {
    int right = 1;
    for (i = 0; i < mine; ++i) own[i] = (int32_t)input(rank, run, i);
    CHECK_OK(comm_prepared_run(all_gather_v, NULL));
    for (r = 0; r < size; ++r)
      for (i = 0; i < (size_t)(r + 1) * count; ++i) right = right && everyone[at[r] + i] == (int32_t)input(r, run, i);
    CHECK(right, "all_gather_v run %d", run);
    /* everyone holds rank r's input as block r on every rank: block `rank` sums to size * it. */
    CHECK_OK(comm_prepared_run(reduce_scatter_v, NULL));
    for (i = 0; i < mine; ++i) right = right && reduced[i] == (int32_t)(size * input(rank, run, i));
    CHECK(right, "reduce_scatter_v run %d", run);
    for (r = 0; r < size; ++r)
      for (i = 0; i < mine; ++i) to_each[(size_t)r * mine + i] = (int32_t)(input(rank, run, i) * 10 + r);
    CHECK_OK(comm_prepared_run(all_to_all_v, NULL));
    for (r = 0; r < size; ++r)
      for (i = 0; i < (size_t)(r + 1) * count; ++i)
        right = right && from_each[at[r] + i] == (int32_t)(input(r, run, i) * 10 + rank);
    CHECK(right, "all_to_all_v run %d", run);
    for (i = 0; i < mine; ++i) own[i] = (int32_t)(input(rank, run, i) + 7);
    CHECK_OK(comm_prepared_run(gather_v, NULL));
    for (r = 0; rank == root && r < size; ++r)
      for (i = 0; i < (size_t)(r + 1) * count; ++i)
        right = right && everyone[at[r] + i] == (int32_t)(input(r, run, i) + 7);
    CHECK(right, "gather_v run %d", run);
    if (rank == root)
      for (i = 0; i < total; ++i) everyone[i] = (int32_t)(i * 3 + (size_t)run);
    CHECK_OK(comm_prepared_run(scatter_v, NULL));
    for (i = 0; i < mine; ++i) right = right && own[i] == (int32_t)((at[rank] + i) * 3 + (size_t)run);
    CHECK(right, "scatter_v run %d", run);
  }
  CHECK_OK(comm_prepared_free(all_gather_v));
  CHECK_OK(comm_prepared_free(reduce_scatter_v));
  CHECK_OK(comm_prepared_free(all_to_all_v));
  CHECK_OK(comm_prepared_free(gather_v));
  CHECK_OK(comm_prepared_free(scatter_v));
  free(counts_of_ranks);
  free(at);
  free(own);
  free(everyone);
  free(reduced);
  free(to_each);
  free(from_each);
}

static void check_refusals(void) {
  double value = 1;
  comm_prepared_t prepared = NULL;
  CHECK(comm_all_reduce_init(&value, &value, 1, COMM_FLOAT64, COMM_SUM, comm, NULL) == COMM_INVALID_ARGUMENT,
        "a NULL result pointer is refused");
  CHECK(comm_prepared_run(NULL, NULL) == COMM_INVALID_ARGUMENT, "a NULL prepared call is refused");
  CHECK(comm_broadcast_init(&value, &value, 1, COMM_FLOAT64, size, comm, &prepared) == COMM_INVALID_ARGUMENT &&
            prepared == NULL,
        "a root outside the communicator is refused when prepared");
  CHECK_OK(comm_group_start());
  CHECK(comm_barrier_init(comm, &prepared) == COMM_INVALID_ARGUMENT && prepared == NULL,
        "preparing inside a group is refused");
  CHECK_OK(comm_group_end());
  CHECK_OK(comm_prepared_free(NULL));
}

int main(void) {
  comm = check_init_from_environment(&rank, &size);
  check_all_reduce(1, 0);
  check_all_reduce(1000, 0);
  check_all_reduce(1000, 1);
  check_data_movement(1);
  check_data_movement(333);
  check_uneven(1);
  check_uneven(50);
  check_refusals();
  CHECK_OK(comm_barrier(comm, NULL));
  CHECK_OK(comm_destroy(comm));
  return check_summary("C API persistent collectives");
}
