/* The drop-in libnccl on a communicator after ncclCommAbort or ncclCommDestroy (issue 27, item
 * 4): ncclAllReduce hung on a mutex in freed memory and ncclGetLastError returned garbage. Every
 * call must return ncclInvalidArgument at once and ncclGetLastError say what happened. An alarm
 * turns a hang into a failure.
 *
 *   build/tests/c/test_nccl_ended
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "c_check.h"
#include "nccl.h"

static void on_alarm(int signal_number) {
  static const char message[] = "test_nccl_ended: a call on an ended communicator hung\n";
  (void)signal_number;
  (void)!write(2, message, sizeof message - 1);
  _exit(1);
}

static void check_ended(ncclComm_t comm, const char* words) {
  float value = 1.0f;
  int number = 0;
  ncclResult_t async_error;
  void* handle = NULL;
  ncclResult_t results[8];
  int i;
  results[0] = ncclAllReduce(&value, &value, 1, ncclFloat32, ncclSum, comm, NULL);
  results[1] = ncclBroadcast(&value, &value, 1, ncclFloat32, 0, comm, NULL);
  results[2] = ncclCommCount(comm, &number);
  results[3] = ncclCommGetAsyncError(comm, &async_error);
  results[4] = ncclCommFinalize(comm);
  results[5] = ncclCommRegister(comm, &value, sizeof value, &handle);
  results[6] = ncclCommDestroy(comm);
  results[7] = ncclCommAbort(comm);
  for (i = 0; i < 8; ++i) CHECK(results[i] == ncclInvalidArgument, "call %d returned %d", i, (int)results[i]);
  CHECK(strstr(ncclGetLastError(comm), words) != NULL, "ncclGetLastError says '%s'", ncclGetLastError(comm));
}

int main(void) {
  ncclUniqueId id;
  ncclComm_t aborted = NULL, destroyed = NULL;
  signal(SIGALRM, on_alarm);
  alarm(30);
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  CHECK(ncclCommInitRank(&aborted, 1, id, 0) == ncclSuccess, "ncclCommInitRank");
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  CHECK(ncclCommInitRank(&destroyed, 1, id, 0) == ncclSuccess, "ncclCommInitRank");
  CHECK(ncclCommAbort(aborted) == ncclSuccess, "ncclCommAbort");
  check_ended(aborted, "aborted");
  CHECK(ncclCommDestroy(destroyed) == ncclSuccess, "ncclCommDestroy");
  check_ended(destroyed, "destroyed");
  return check_summary("drop-in libnccl after abort and destroy");
}
