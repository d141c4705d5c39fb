/* comm_abort while the peers are stuck: ranks 1.. wait in a receive from rank 0 that rank 0
 * never sends; rank 0 aborts its communicator. The abort must return within a second, and every
 * waiting peer must get an error (not hang) within a few seconds, with a message.
 *
 *   commrun -n 3 build/tests/c/test_c_abort         (COMM_TRANSPORT=tcp for the TCP transport)
 */
#include <string.h>
#include <time.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

int main(void) {
  int rank = -1, size = 0;
  comm_result_t result;
  int32_t value = 0;
  double started, took;
  comm_t comm = check_init_from_environment(&rank, &size);
  CHECK_OK(comm_barrier(comm, NULL));
  if (rank == 0) {
    struct timespec pause = {0, 300 * 1000 * 1000}; /* the others are in their receive by then */
    nanosleep(&pause, NULL);
    started = seconds_now();
    CHECK_OK(comm_abort(comm));
    took = seconds_now() - started;
    CHECK(took < 1.0, "comm_abort took %.3f s", took);
    printf("[rank 0] comm_abort returned after %.3f s\n", took);
  } else {
    started = seconds_now();
    result = comm_recv(&value, 1, COMM_INT32, 0, comm, NULL);
    took = seconds_now() - started;
    CHECK(result != COMM_SUCCESS, "the receive from the aborted rank succeeded");
    CHECK(took < 5.0, "the receive failed only after %.2f s", took);
    CHECK(strlen(comm_get_last_error(comm)) > 0, "no message");
    printf("[rank %d] after %.2f s: %s: %s\n", rank, took, comm_get_error_string(result), comm_get_last_error(comm));
    CHECK_OK(comm_destroy(comm));
  }
  return check_summary("C API abort");
}
