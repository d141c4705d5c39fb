/* comm_revoke and comm_shrink from C: rank 1 revokes the communicator while the others wait in
 * an all_reduce for it; they fail promptly with a message naming rank 1, then shrink without it
 * (it is alive: it leaves by destroying its communicator) and check an all_reduce on the rest.
 *
 *   commrun -n 3 build/tests/c/test_c_recovery       (COMM_TRANSPORT=tcp for the TCP transport)
 */
#include <string.h>
#include <time.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

int main(void) {
  int rank = -1, size = 0, new_rank = -1, new_size = 0, excluded = 1;
  comm_result_t result;
  int64_t value = 1, expected = 0;
  double started, took;
  comm_t comm = check_init_from_environment(&rank, &size), shrunk = NULL;
  CHECK(size >= 2, "needs 2 ranks or more, got %d", size);
  CHECK_OK(comm_barrier(comm, NULL));
  if (rank == 1) {
    struct timespec pause = {0, 300 * 1000 * 1000}; /* the others are in their all_reduce by then */
    nanosleep(&pause, NULL);
    CHECK_OK(comm_revoke(comm, "a test of comm_revoke"));
    result = comm_all_reduce(&value, &value, 1, COMM_INT64, COMM_SUM, comm, NULL);
    CHECK(result == COMM_REMOTE_ERROR, "a call on the revoked communicator returned %d", (int)result);
    CHECK_OK(comm_destroy(comm));
    return check_summary("C API revoke (the revoker)");
  }
  started = seconds_now();
  result = comm_all_reduce(&value, &value, 1, COMM_INT64, COMM_SUM, comm, NULL);
  took = seconds_now() - started;
  CHECK(result == COMM_REMOTE_ERROR, "the all_reduce on a revoked communicator returned %d", (int)result);
  CHECK(took < 5.0, "it failed only after %.2f s", took);
  CHECK(strstr(comm_get_last_error(comm), "rank 1 revoked") != NULL, "the message does not name rank 1: %s",
        comm_get_last_error(comm));
  CHECK(strstr(comm_get_last_error(comm), "a test of comm_revoke") != NULL, "the message lacks the reason: %s",
        comm_get_last_error(comm));
  CHECK(comm_shrink(comm, &excluded, -1, &shrunk, NULL) == COMM_INVALID_ARGUMENT, "a negative count was taken");
  CHECK_OK(comm_shrink(comm, &excluded, 1, &shrunk, NULL));
  CHECK_OK(comm_user_rank(shrunk, &new_rank));
  CHECK_OK(comm_count(shrunk, &new_size));
  CHECK(new_size == size - 1, "the shrunk communicator has %d ranks, not %d", new_size, size - 1);
  CHECK(new_rank == (rank == 0 ? 0 : rank - 1), "rank %d is %d in the shrunk communicator", rank, new_rank);
  value = rank; /* the old ranks 0, 2, 3, ...: their sum is known */
  CHECK_OK(comm_all_reduce(&value, &value, 1, COMM_INT64, COMM_SUM, shrunk, NULL));
  expected = (int64_t)size * (size - 1) / 2 - 1;
  CHECK(value == expected, "the shrunk all_reduce gave %lld, not %lld", (long long)value, (long long)expected);
  printf("[rank %d] revoked after %.3f s; now rank %d of %d, sum %lld\n", rank, took, new_rank, new_size,
         (long long)value);
  CHECK_OK(comm_destroy(shrunk));
  CHECK_OK(comm_destroy(comm));
  return check_summary("C API revoke and shrink");
}
