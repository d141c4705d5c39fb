/* Groups and split in the C API, under commrun with 1 to 4 ranks: an all-to-all written as
 * grouped sends and receives to every rank, itself included, posted sends first (which only
 * works if the group lets them progress in any order); nested groups; two communicators' calls
 * in one group; comm_split by color and key (numbering, sizes, a rank with no color) and
 * collectives on the parts; comm_group_end without a start.
 *
 *   commrun -n 4 build/tests/c/test_c_groups
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

static int rank, size;
static comm_t world;

static int64_t block_value(int from, int to, size_t i) {
  return (int64_t)from * 1000000 + (int64_t)to * 1000 + (int64_t)i;
}

static void check_grouped_all_to_all(size_t count) {
  int64_t* send = malloc((size_t)size * count * sizeof *send + 1);
  int64_t* receive = malloc((size_t)size * count * sizeof *receive + 1);
  int peer;
  size_t i;
  for (peer = 0; peer < size; ++peer) {
    for (i = 0; i < count; ++i) send[(size_t)peer * count + i] = block_value(rank, peer, i);
  }
  memset(receive, 0xFF, (size_t)size * count * sizeof *receive);
  CHECK_OK(comm_group_start());
  for (peer = 0; peer < size; ++peer)
    CHECK_OK(comm_send(send + (size_t)peer * count, count, COMM_INT64, peer, world, NULL));
  for (peer = 0; peer < size; ++peer) {
    CHECK_OK(comm_recv(receive + (size_t)peer * count, count, COMM_INT64, peer, world, NULL));
  }
  CHECK_OK(comm_group_end());
  for (peer = 0; peer < size; ++peer) {
    for (i = 0; i < count; ++i) {
      if (receive[(size_t)peer * count + i] != block_value(peer, rank, i)) {
        CHECK(0, "grouped all-to-all of %zu: block from %d wrong at %zu", count, peer, i);
        break;
      }
    }
  }
  free(send);
  free(receive);
}

static void check_nested_groups(void) {
  int32_t value = rank + 1, total = -1;
  CHECK_OK(comm_group_start());
  CHECK_OK(comm_group_start());
  CHECK_OK(comm_all_reduce(&value, &total, 1, COMM_INT32, COMM_SUM, world, NULL));
  CHECK_OK(comm_group_end()); /* the inner end runs nothing yet */
  CHECK(total == -1, "an inner comm_group_end ran the queued all_reduce already");
  CHECK_OK(comm_group_end());
  CHECK(total == size * (size + 1) / 2, "nested groups: all_reduce gave %d", (int)total);
}

static void check_split(void) {
  /* Colors: even and odd ranks; with 3 or more ranks, the last rank joins none. Keys reverse
   * the order, so the highest rank of a color is its rank 0. */
  int color = (size > 2 && rank == size - 1) ? COMM_SPLIT_NOCOLOR : rank % 2;
  comm_t part = NULL;
  int part_rank = -1, part_size = -1, expected_size = 0, expected_rank = 0, r;
  double value, sum = 0, expected_sum = 0;
  comm_result_t async_error = COMM_INTERNAL_ERROR;
  CHECK_OK(comm_split(world, color, -rank, &part, NULL));
  if (color == COMM_SPLIT_NOCOLOR) {
    int64_t mine = rank, world_max = -1;
    CHECK(part == NULL, "COMM_SPLIT_NOCOLOR gave a communicator");
    /* the world's half of the grouped calls below */
    CHECK_OK(comm_group_start());
    CHECK_OK(comm_all_reduce(&mine, &world_max, 1, COMM_INT64, COMM_MAX, world, NULL));
    CHECK_OK(comm_group_end());
    CHECK(world_max == size - 1, "grouped world all_reduce: %lld", (long long)world_max);
    return;
  }
  CHECK(part != NULL, "comm_split gave no communicator");
  if (!part) return;
  for (r = 0; r < size; ++r) {
    int their_color = (size > 2 && r == size - 1) ? COMM_SPLIT_NOCOLOR : r % 2;
    if (their_color != color) continue;
    ++expected_size;
    expected_sum += r;
    if (r > rank) ++expected_rank;
  }
  CHECK_OK(comm_user_rank(part, &part_rank));
  CHECK_OK(comm_count(part, &part_size));
  CHECK(part_rank == expected_rank && part_size == expected_size, "split: rank %d of %d, expected %d of %d", part_rank,
        part_size, expected_rank, expected_size);
  value = rank;
  CHECK_OK(comm_all_reduce(&value, &sum, 1, COMM_FLOAT64, COMM_SUM, part, NULL));
  CHECK(sum == expected_sum, "all_reduce on the split: %g, expected %g", sum, expected_sum);

  /* Two communicators' collectives in one group. */
  {
    int64_t mine = rank, world_max = -1, part_min = -1;
    CHECK_OK(comm_group_start());
    CHECK_OK(comm_all_reduce(&mine, &world_max, 1, COMM_INT64, COMM_MAX, world, NULL));
    CHECK_OK(comm_all_reduce(&mine, &part_min, 1, COMM_INT64, COMM_MIN, part, NULL));
    CHECK_OK(comm_group_end());
    CHECK(world_max == size - 1, "grouped world all_reduce: %lld", (long long)world_max);
    CHECK(part_min == rank % 2, "grouped split all_reduce: %lld", (long long)part_min);
  }
  CHECK_OK(comm_get_async_error(part, &async_error));
  CHECK(async_error == COMM_SUCCESS, "async error of a working split: %s", comm_get_error_string(async_error));
  CHECK_OK(comm_destroy(part));
}

int main(void) {
  comm_result_t result;
  world = check_init_from_environment(&rank, &size);
  check_grouped_all_to_all(0);
  check_grouped_all_to_all(1);
  check_grouped_all_to_all(5000);
  check_grouped_all_to_all(300000); /* 2.4 MB per peer: beyond any eager limit */
  check_nested_groups();
  check_split();
  check_split(); /* a second split of the same communicator is a new group */
  result = comm_group_end();
  CHECK(result == COMM_INVALID_USAGE && strstr(comm_get_last_error(NULL), "comm_group_start") != NULL,
        "comm_group_end without a start: %s (%s)", comm_get_error_string(result), comm_get_last_error(NULL));
  CHECK_OK(comm_barrier(world, NULL));
  if (size > 1) {
    /* Ranks that call different collectives: rank 0 an all_reduce, the others a broadcast. Every
     * rank gets COMM_INVALID_USAGE naming both calls, and the communicator is over. */
    int32_t value = 1;
    comm_result_t async_error = COMM_SUCCESS;
    result = rank == 0 ? comm_all_reduce(&value, &value, 1, COMM_INT32, COMM_SUM, world, NULL)
                       : comm_broadcast(&value, &value, 1, COMM_INT32, 0, world, NULL);
    CHECK(result == COMM_INVALID_USAGE && strstr(comm_get_last_error(world), "mismatch") != NULL,
          "mismatched collectives: %s (%s)", comm_get_error_string(result), comm_get_last_error(world));
    CHECK_OK(comm_get_async_error(world, &async_error));
    CHECK(async_error == COMM_INVALID_USAGE, "async error after a mismatch: %s", comm_get_error_string(async_error));
  }
  CHECK_OK(comm_destroy(world));
  return check_summary("C API groups and split");
}
