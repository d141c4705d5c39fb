/* What unused unique ids hold (issue 27, item 7): 50 calls of comm_get_unique_id left 51
 * threads, 205 descriptors and 50 listening ports until the process exited. Each id holds one
 * thread and a few descriptors while an init may still use it; once the init timeout has passed
 * (COMM_TIMEOUT=1 here) the next call lets go of those no communicator took.
 *
 *   COMM_TIMEOUT=1 build/tests/c/test_c_unique_ids
 */
#include <dirent.h>
#include <time.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

static int entries(const char* directory) {
  int count = 0;
  struct dirent* entry;
  DIR* listing = opendir(directory);
  if (!listing) return -1;
  while ((entry = readdir(listing)) != NULL) count += entry->d_name[0] != '.';
  closedir(listing);
  return count;
}

int main(void) {
  comm_unique_id id;
  int i, threads_before, fds_before, threads_held, fds_held, threads_after, fds_after;
  struct timespec pause = {1, 300 * 1000 * 1000};
  CHECK_OK(comm_get_unique_id(&id)); /* the first call starts what every call shares (logging) */
  nanosleep(&pause, NULL);
  threads_before = entries("/proc/self/task");
  fds_before = entries("/proc/self/fd");
  for (i = 0; i < 50; ++i) CHECK_OK(comm_get_unique_id(&id));
  threads_held = entries("/proc/self/task");
  fds_held = entries("/proc/self/fd");
  printf("50 ids held: %d threads (from %d), %d descriptors (from %d)\n", threads_held, threads_before, fds_held,
         fds_before);
  CHECK(threads_held - threads_before <= 50, "50 ids hold %d threads", threads_held - threads_before);
  nanosleep(&pause, NULL); /* past COMM_TIMEOUT: no init can use them any more */
  CHECK_OK(comm_get_unique_id(&id));
  threads_after = entries("/proc/self/task");
  fds_after = entries("/proc/self/fd");
  printf("after the timeout and one more id: %d threads, %d descriptors\n", threads_after, fds_after);
  CHECK(threads_after <= threads_before, "%d threads remain (from %d)", threads_after, threads_before);
  CHECK(fds_after <= fds_before, "%d descriptors remain (from %d)", fds_after, fds_before);
  return check_summary("unused unique ids are released");
}
