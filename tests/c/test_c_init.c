/* Communicators made from unique ids, in one process (as NCCL programs that drive several GPUs
 * from one thread do): three ranks' inits queued in one group and run together at its end, then
 * their collectives in one group; non-blocking inits polled with comm_get_async_error; an init
 * whose peers never come fails with COMM_REMOTE_ERROR at the configured timeout; and every
 * invalid argument answered with COMM_INVALID_ARGUMENT (or COMM_INVALID_USAGE) and a message
 * that names it. No exception escapes, no crash.
 *
 *   build/tests/c/test_c_init
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "comm/comm.h" /* first: c_check.h then defines CHECK_OK */

#include "c_check.h"

#define RANKS 3

static void check_sums(comm_t* comms) {
  float values[RANKS][4];
  int r, i;
  CHECK_OK(comm_group_start());
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < 4; ++i) values[r][i] = (float)(r * 10 + i);
    CHECK_OK(comm_all_reduce(values[r], values[r], 4, COMM_FLOAT32, COMM_SUM, comms[r], NULL));
  }
  CHECK_OK(comm_group_end());
  for (r = 0; r < RANKS; ++r) {
    for (i = 0; i < 4; ++i) {
      CHECK(values[r][i] == (float)(30 + 3 * i), "rank %d: sum[%d] = %g", r, i, values[r][i]);
    }
  }
}

static void check_grouped_init(void) {
  comm_unique_id id;
  comm_t comms[RANKS];
  int r, rank = -1, count = -1, device = -2;
  CHECK_OK(comm_get_unique_id(&id));
  CHECK_OK(comm_group_start());
  for (r = 0; r < RANKS; ++r) CHECK_OK(comm_init_rank(&comms[r], RANKS, id, r)); /* queued: must not block */
  CHECK_OK(comm_group_end());
  CHECK_OK(comm_user_rank(comms[1], &rank));
  CHECK_OK(comm_count(comms[1], &count));
  CHECK_OK(comm_cu_device(comms[1], &device));
  CHECK(rank == 1 && count == RANKS && device == -1, "rank %d count %d device %d", rank, count, device);
  check_sums(comms);
  for (r = 0; r < RANKS; ++r) CHECK_OK(comm_destroy(comms[r]));
}

static void check_non_blocking_init(void) {
  comm_unique_id id;
  comm_t comms[RANKS];
  comm_config_t config = COMM_CONFIG_INITIALIZER;
  comm_result_t states[RANKS];
  int r, ready = 0, polls;
  struct timespec pause = {0, 5 * 1000 * 1000};
  config.blocking = 0;
  CHECK_OK(comm_get_unique_id(&id));
  for (r = 0; r < RANKS; ++r) {
    comm_result_t result = comm_init_rank_config(&comms[r], RANKS, id, r, &config);
    CHECK(result == COMM_IN_PROGRESS || result == COMM_SUCCESS, "non-blocking init: %s", comm_get_error_string(result));
  }
  for (polls = 0; polls < 4000 && ready < RANKS; ++polls) {
    ready = 0;
    for (r = 0; r < RANKS; ++r) {
      CHECK_OK(comm_get_async_error(comms[r], &states[r]));
      ready += states[r] == COMM_SUCCESS;
      CHECK(states[r] == COMM_SUCCESS || states[r] == COMM_IN_PROGRESS, "async error %s: %s",
            comm_get_error_string(states[r]), comm_get_last_error(comms[r]));
    }
    nanosleep(&pause, NULL);
  }
  CHECK(ready == RANKS, "%d of %d non-blocking inits ready after 20 s", ready, RANKS);
  if (ready == RANKS) check_sums(comms);
  for (r = 0; r < RANKS; ++r) CHECK_OK(comm_destroy(comms[r]));
}

static void check_missing_peer_times_out(void) {
  comm_unique_id id;
  comm_t comm = NULL;
  comm_config_t config = COMM_CONFIG_INITIALIZER;
  double started, waited;
  comm_result_t result;
  config.timeout_ms = 1000;
  CHECK_OK(comm_get_unique_id(&id));
  started = seconds_now();
  result = comm_init_rank_config(&comm, 2, id, 0, &config); /* rank 1 never comes */
  waited = seconds_now() - started;
  CHECK(result == COMM_REMOTE_ERROR, "init without its peer: %s (%s)", comm_get_error_string(result),
        comm_get_last_error(NULL));
  CHECK(waited > 0.8 && waited < 10, "init without its peer failed after %.2f s, with a 1 s timeout", waited);
  CHECK(strstr(comm_get_last_error(NULL), "rank") != NULL, "the message names no rank: %s", comm_get_last_error(NULL));
  if (comm) {
    comm_result_t state = COMM_SUCCESS;
    CHECK_OK(comm_get_async_error(comm, &state));
    CHECK(state == COMM_REMOTE_ERROR, "a failed init's async error: %s", comm_get_error_string(state));
    CHECK_OK(comm_destroy(comm));
  }
}

/* An id naming a host that does not exist (the test knows where an id keeps its host: after
 * the magic, version and port, at byte 7): a system error at once, saying which host. */
static void check_unreachable_store(void) {
  comm_unique_id id;
  comm_t comm = NULL;
  comm_result_t result;
  CHECK_OK(comm_get_unique_id(&id));
  memset(id.internal + 7, 0, 56);
  strcpy(id.internal + 7, "no-such-host.invalid");
  result = comm_init_rank(&comm, 2, id, 0);
  CHECK(result == COMM_SYSTEM_ERROR && strstr(comm_get_last_error(NULL), "no-such-host.invalid") != NULL,
        "init with an unresolvable store host: %s (%s)", comm_get_error_string(result), comm_get_last_error(NULL));
  if (comm) CHECK_OK(comm_destroy(comm));
}

/* A call that must fail with `code`, leaving a last error that contains `words`. */
#define CHECK_REFUSED(call, code, words)                                                                           \
  do {                                                                                                             \
    comm_result_t refused_ = (call);                                                                               \
    const char* message_ = comm_get_last_error(NULL);                                                              \
    CHECK(refused_ == (code) && strstr(message_, (words)) != NULL, "%s -> %s (%s), expected %s about '%s'", #call, \
          comm_get_error_string(refused_), message_, comm_get_error_string(code), (words));                        \
  } while (0)

static void check_invalid_arguments(void) {
  comm_unique_id id, damaged;
  comm_t comm = NULL, none = NULL;
  comm_config_t config = COMM_CONFIG_INITIALIZER, bad_config = COMM_CONFIG_INITIALIZER;
  float data[4] = {1, 2, 3, 4};
  int version = 0;
  CHECK_OK(comm_get_version(&version));
  CHECK(version >= 100, "version %d", version);
  CHECK_REFUSED(comm_get_unique_id(NULL), COMM_INVALID_ARGUMENT, "id");
  CHECK_OK(comm_get_unique_id(&id));
  memcpy(&damaged, &id, sizeof id);
  damaged.internal[0] ^= 0x55;
  CHECK_REFUSED(comm_init_rank(NULL, 1, id, 0), COMM_INVALID_ARGUMENT, "comm");
  CHECK_REFUSED(comm_init_rank(&none, 0, id, 0), COMM_INVALID_ARGUMENT, "nranks");
  CHECK_REFUSED(comm_init_rank(&none, 2, id, 2), COMM_INVALID_ARGUMENT, "rank");
  CHECK_REFUSED(comm_init_rank(&none, 2, id, -1), COMM_INVALID_ARGUMENT, "rank");
  CHECK_REFUSED(comm_init_rank(&none, 1, damaged, 0), COMM_INVALID_ARGUMENT, "comm_get_unique_id");
  bad_config.magic = 0;
  CHECK_REFUSED(comm_init_rank_config(&none, 1, id, 0, &bad_config), COMM_INVALID_ARGUMENT, "COMM_CONFIG_INITIALIZER");
  bad_config = config;
  bad_config.blocking = 7;
  CHECK_REFUSED(comm_init_rank_config(&none, 1, id, 0, &bad_config), COMM_INVALID_ARGUMENT, "blocking");
  CHECK(none == NULL, "a refused init left a communicator");

  CHECK_OK(comm_init_rank(&comm, 1, id, 0));
  CHECK_REFUSED(comm_all_reduce(data, data, 4, (comm_datatype_t)99, COMM_SUM, comm, NULL), COMM_INVALID_ARGUMENT,
                "datatype 99");
  CHECK_REFUSED(comm_all_reduce(data, data, 4, COMM_FLOAT32, (comm_op_t)42, comm, NULL), COMM_INVALID_ARGUMENT,
                "op 42");
  CHECK_REFUSED(comm_all_reduce(data, data, 4, COMM_FLOAT32, COMM_BXOR, comm, NULL), COMM_INVALID_ARGUMENT, "bitwise");
  CHECK_REFUSED(comm_all_reduce(NULL, data, 4, COMM_FLOAT32, COMM_SUM, comm, NULL), COMM_INVALID_ARGUMENT,
                "sendbuff is NULL");
  CHECK_REFUSED(comm_all_reduce(data, NULL, 4, COMM_FLOAT32, COMM_SUM, comm, NULL), COMM_INVALID_ARGUMENT,
                "recvbuff is NULL");
  CHECK_REFUSED(comm_all_reduce(data, data, 4, COMM_FLOAT32, COMM_SUM, NULL, NULL), COMM_INVALID_ARGUMENT,
                "comm is NULL");
  CHECK_REFUSED(comm_all_reduce(data, data, (size_t)-1, COMM_FLOAT32, COMM_SUM, comm, NULL), COMM_INVALID_ARGUMENT,
                "too large");
  CHECK_REFUSED(comm_broadcast(data, data, 4, COMM_FLOAT32, 1, comm, NULL), COMM_INVALID_ARGUMENT, "root");
  CHECK_REFUSED(comm_reduce(data, data, 4, COMM_FLOAT32, COMM_SUM, -1, comm, NULL), COMM_INVALID_ARGUMENT, "root");
  CHECK_REFUSED(comm_send(data, 4, COMM_FLOAT32, 3, comm, NULL), COMM_INVALID_ARGUMENT, "3");
  CHECK_REFUSED(comm_recv(data, 4, COMM_FLOAT32, -1, comm, NULL), COMM_INVALID_ARGUMENT, "peer");
  CHECK_REFUSED(comm_split(comm, -5, 0, &none, NULL), COMM_INVALID_ARGUMENT, "color");
  CHECK_REFUSED(comm_count(comm, NULL), COMM_INVALID_ARGUMENT, "NULL");
  /* The communicator's own last error says the same as the thread's. */
  CHECK(strstr(comm_get_last_error(comm), "NULL") != NULL || strstr(comm_get_last_error(comm), "peer") != NULL,
        "the communicator's last error: %s", comm_get_last_error(comm));
  /* Count 0 with NULL buffers is a valid no-op. */
  CHECK_OK(comm_all_reduce(NULL, NULL, 0, COMM_FLOAT32, COMM_SUM, comm, NULL));
  CHECK_OK(comm_destroy(comm));
  CHECK_REFUSED(comm_destroy(comm), COMM_INVALID_ARGUMENT, "destroyed");
  CHECK_REFUSED(comm_abort(NULL), COMM_INVALID_ARGUMENT, "NULL");
  {
    /* Device memory: COMM_CUDA_ERROR, with a message, where no GPU is seen. */
    void* device_memory = NULL;
    comm_result_t result = comm_mem_alloc(&device_memory, 4096);
    if (result == COMM_SUCCESS) {
      CHECK_OK(comm_mem_free(device_memory));
      CHECK_REFUSED(comm_mem_free(device_memory), COMM_INVALID_ARGUMENT, "freed already");
    } else {
      CHECK(result == COMM_CUDA_ERROR && device_memory == NULL && strlen(comm_get_last_error(NULL)) > 0,
            "comm_mem_alloc without a GPU: %s (%s)", comm_get_error_string(result), comm_get_last_error(NULL));
    }
  }
  CHECK(strcmp(comm_get_error_string(COMM_SUCCESS), "no error") == 0, "error string of success");
  CHECK(strlen(comm_get_error_string((comm_result_t)99)) > 0, "error string of an unknown code");
}

/* comm_dump_trace: the flight recorder's file holds this process's calls; a folder that cannot
 * be written is an error that names the file. */
static void check_dump_trace(void) {
  comm_unique_id id;
  comm_t comm = NULL;
  float data[4] = {1, 2, 3, 4};
  char dir[] = "/tmp/comm-c-trace-XXXXXX", path[128], text[1 << 16];
  FILE* file;
  size_t length;
  int all_reduces = 0;
  const char* at;
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  CHECK_OK(comm_get_unique_id(&id));
  CHECK_OK(comm_init_rank(&comm, 1, id, 0));
  CHECK_OK(comm_all_reduce(data, data, 4, COMM_FLOAT32, COMM_SUM, comm, NULL));
  CHECK_OK(comm_all_reduce(data, data, 4, COMM_FLOAT32, COMM_MAX, comm, NULL));
  CHECK_OK(comm_dump_trace(dir));
  snprintf(path, sizeof path, "%s/comm_trace_rank0.json", dir);
  file = fopen(path, "r");
  CHECK(file != NULL, "no dump at %s", path);
  if (file) {
    length = fread(text, 1, sizeof text - 1, file);
    text[length] = 0;
    fclose(file);
    for (at = strstr(text, "\"op\": \"all_reduce\""); at; at = strstr(at + 1, "\"op\": \"all_reduce\"")) ++all_reduces;
    CHECK(all_reduces >= 2 && strstr(text, "\"format\": \"libcomm-trace\"") != NULL, "the dump holds %d all_reduces",
          all_reduces);
    remove(path);
  }
  rmdir(dir);
  CHECK_REFUSED(comm_dump_trace("/nonexistent/comm-trace"), COMM_SYSTEM_ERROR, "/nonexistent/comm-trace");
  CHECK_OK(comm_destroy(comm));
}

int main(void) {
  check_rank = 0;
  check_invalid_arguments();
  check_grouped_init();
  check_non_blocking_init();
  check_missing_peer_times_out();
  check_unreachable_store();
  check_dump_trace();
  return check_summary("C API init and invalid arguments");
}
