/* A program that ends without destroying its communicators (as programs that fail or forget
 * do) must still exit cleanly: libcomm then frees them while the process's statics go, and a
 * group's hang watch used a registry that could already be gone (a segmentation fault at exit).
 *
 *   build/tests/c/test_c_exit_without_destroy
 */
#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

int main(void) {
  comm_unique_id id;
  comm_t comms[2];
  float value[2] = {1, 2};
  int r;
  check_rank = 0;
  CHECK_OK(comm_get_unique_id(&id));
  CHECK_OK(comm_group_start());
  for (r = 0; r < 2; ++r) CHECK_OK(comm_init_rank(&comms[r], 2, id, r));
  CHECK_OK(comm_group_end());
  CHECK_OK(comm_group_start());
  for (r = 0; r < 2; ++r) CHECK_OK(comm_all_reduce(&value[r], &value[r], 1, COMM_FLOAT32, COMM_SUM, comms[r], NULL));
  CHECK_OK(comm_group_end());
  CHECK(value[0] == 3 && value[1] == 3, "all_reduce: %g %g", value[0], value[1]);
  return check_summary("C API, exiting with communicators alive");
}
