/* Calls a careless or hostile program makes (issue 27, items 4 and 5), each answered at once
 * with COMM_INVALID_ARGUMENT and a message that names what is wrong, never success, a hang or a
 * touch of freed memory (the suite runs this under valgrind where it is installed):
 * - every call on a destroyed or an aborted communicator, destroy and abort again included;
 * - counts whose product with the number of ranks (or with the datatype's size) wraps around.
 *
 *   build/tests/c/test_c_hostile_calls
 */
#include <string.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

/* Expects COMM_INVALID_ARGUMENT from `call`, within a second, with `words` in the last error. */
#define CHECK_REFUSED(comm, call, words)                                                                              \
  do {                                                                                                                \
    double started_ = seconds_now();                                                                                  \
    comm_result_t result_ = (call);                                                                                   \
    double took_ = seconds_now() - started_;                                                                          \
    CHECK(result_ == COMM_INVALID_ARGUMENT, "%s -> %s, not invalid argument", #call, comm_get_error_string(result_)); \
    CHECK(took_ < 1.0, "%s took %.2f s", #call, took_);                                                               \
    CHECK(strstr(comm_get_last_error(comm), words) != NULL, "%s: the last error '%s' does not say '%s'", #call,       \
          comm_get_last_error(comm), words);                                                                          \
  } while (0)

static comm_t one_rank(void) {
  comm_unique_id id;
  comm_t comm = NULL;
  CHECK_OK(comm_get_unique_id(&id));
  CHECK_OK(comm_init_rank(&comm, 1, id, 0));
  return comm;
}

static void check_calls_on_ended(comm_t comm, const char* words) {
  float value = 1.0f, out = 0.0f;
  int number = 0;
  comm_result_t async_error;
  comm_t child = NULL;
  CHECK_REFUSED(comm, comm_all_reduce(&value, &out, 1, COMM_FLOAT32, COMM_SUM, comm, NULL), words);
  CHECK_REFUSED(comm, comm_broadcast(&value, &out, 1, COMM_FLOAT32, 0, comm, NULL), words);
  CHECK_REFUSED(comm, comm_all_to_all(&value, &out, 1, COMM_FLOAT32, comm, NULL), words);
  CHECK_REFUSED(comm, comm_send(&value, 1, COMM_FLOAT32, 0, comm, NULL), words);
  CHECK_REFUSED(comm, comm_barrier(comm, NULL), words);
  CHECK_REFUSED(comm, comm_count(comm, &number), words);
  CHECK_REFUSED(comm, comm_user_rank(comm, &number), words);
  CHECK_REFUSED(comm, comm_cu_device(comm, &number), words);
  CHECK_REFUSED(comm, comm_get_async_error(comm, &async_error), words);
  CHECK_REFUSED(comm, comm_split(comm, 0, 0, &child, NULL), words);
  CHECK(child == NULL, "comm_split on an ended communicator made one");
  /* Inside a group, too: refused when called, not at the group's end. */
  CHECK_OK(comm_group_start());
  CHECK_REFUSED(comm, comm_all_reduce(&value, &out, 1, COMM_FLOAT32, COMM_SUM, comm, NULL), words);
  CHECK_OK(comm_group_end());
  CHECK_REFUSED(comm, comm_destroy(comm), words);
  CHECK_REFUSED(comm, comm_abort(comm), words);
}

static void check_sizes_that_wrap(void) {
  comm_unique_id id;
  comm_t comms[4];
  int size, r;
  char buffer[64];
  const size_t two_63 = (size_t)1 << 63, two_62 = (size_t)1 << 62;
  const size_t wraps = ((size_t)1 << 61) + 4; /* past what 8-byte elements can address, divisible by 2 and 4 */
  for (size = 2; size <= 4; size += 2) {
    CHECK_OK(comm_get_unique_id(&id));
    CHECK_OK(comm_group_start());
    for (r = 0; r < size; ++r) CHECK_OK(comm_init_rank(&comms[r], size, id, r));
    CHECK_OK(comm_group_end());
    /* 2^63 on 2 ranks and 2^62 on 4 wrap to 0 elements in all: the probe's silent success. */
    CHECK_REFUSED(comms[0], comm_all_to_all(buffer, buffer, size == 2 ? two_63 : two_62, COMM_INT8, comms[0], NULL),
                  "count");
    /* Counts a buffer may have, whose product with the ranks no buffer may. */
    CHECK_REFUSED(comms[0], comm_all_gather(buffer, buffer, wraps / (size_t)size, COMM_INT8, comms[0], NULL),
                  "sendcount");
    CHECK_REFUSED(comms[0],
                  comm_reduce_scatter(buffer, buffer, wraps / (size_t)size, COMM_INT32, COMM_SUM, comms[0], NULL),
                  "recvcount");
    CHECK_REFUSED(comms[0], comm_gather(buffer, buffer, wraps / (size_t)size, COMM_INT8, 0, comms[0], NULL),
                  "sendcount");
    CHECK_REFUSED(comms[0], comm_scatter(buffer, buffer, wraps / (size_t)size, COMM_INT8, 0, comms[0], NULL),
                  "recvcount");
    /* A count whose bytes wrap: 2^62 float64 is 2^65 bytes. */
    CHECK_REFUSED(comms[0], comm_all_reduce(buffer, buffer, two_62, COMM_FLOAT64, COMM_SUM, comms[0], NULL),
                  "sendbuff");
    CHECK_REFUSED(comms[0], comm_send(buffer, two_62, COMM_FLOAT64, 1, comms[0], NULL), "sendbuff");
    /* The communicators still work after the refusals. */
    CHECK_OK(comm_group_start());
    for (r = 0; r < size; ++r)
      CHECK_OK(comm_all_reduce(&buffer[r], &buffer[r], 1, COMM_INT8, COMM_SUM, comms[r], NULL));
    CHECK_OK(comm_group_end());
    for (r = 0; r < size; ++r) CHECK_OK(comm_destroy(comms[r]));
  }
}

int main(void) {
  comm_t destroyed = one_rank(), aborted = one_rank();
  float value = 3.0f;
  CHECK_OK(comm_all_reduce(&value, &value, 1, COMM_FLOAT32, COMM_SUM, destroyed, NULL));
  CHECK(value == 3.0f, "one rank's sum is %g", value);
  CHECK_OK(comm_destroy(destroyed));
  CHECK(strstr(comm_get_last_error(destroyed), "destroyed") != NULL, "after comm_destroy the last error is '%s'",
        comm_get_last_error(destroyed));
  check_calls_on_ended(destroyed, "destroyed");
  CHECK_OK(comm_abort(aborted));
  check_calls_on_ended(aborted, "aborted");
  check_sizes_that_wrap();
  return check_summary("C API hostile calls");
}
