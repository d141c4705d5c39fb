/* What the C API's tests (and the drop-in libnccl's) share: checks that count failures and say
 * which rank saw them, and values of every datatype read and written as doubles (float16 and
 * bfloat16 converted here, round to nearest even), so that references can be computed in double.
 * Datatypes are the shared numbering of int and ncclDataType_t (0 to 9, and 10 for
 * libcomm's bool). Include comm/comm.h first for CHECK_OK. C99. */
#ifndef COMM_TESTS_C_CHECK_H
#define COMM_TESTS_C_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern int check_failures;
extern int check_count;
extern int check_rank;

#define CHECK(condition, ...)                                                 \
  do {                                                                        \
    ++check_count;                                                            \
    if (!(condition)) {                                                       \
      ++check_failures;                                                       \
      if (check_failures <= 20) {                                             \
        fprintf(stderr, "[rank %d] %s:%d: ", check_rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                         \
        fprintf(stderr, "\n");                                                \
      }                                                                       \
    }                                                                         \
  } while (0)

#ifdef COMM_COMM_H
/* The job's communicator from the environment (commrun's variables), with this rank's place in
 * it noted for CHECK's messages; exits with libcomm's message where there is none. */
static inline comm_t check_init_from_environment(int* rank, int* size) {
  comm_t comm = NULL;
  comm_result_t result = comm_init_from_environment(&comm, NULL);
  if (result != COMM_SUCCESS) {
    fprintf(stderr, "init: %s: %s\n", comm_get_error_string(result), comm_get_last_error(NULL));
    exit(1);
  }
  CHECK(comm_user_rank(comm, rank) == COMM_SUCCESS && comm_count(comm, size) == COMM_SUCCESS,
        "comm_user_rank or comm_count failed: %s", comm_get_last_error(NULL));
  check_rank = *rank;
  return comm;
}

/* A call that must succeed; on failure, says the code and the last error. */
#define CHECK_OK(call)                                                                                    \
  do {                                                                                                    \
    comm_result_t checked_result_ = (call);                                                               \
    CHECK(checked_result_ == COMM_SUCCESS, "%s -> %s: %s", #call, comm_get_error_string(checked_result_), \
          comm_get_last_error(NULL));                                                                     \
  } while (0)

#endif

/* Seconds on the monotonic clock. */
double seconds_now(void);

/* Prints "<name>: N checks, N failed" and returns the exit status. */
int check_summary(const char* name);

extern const int all_datatypes[]; /* 0 to 10 */
extern const size_t all_datatype_count;
const char* datatype_name(int datatype);
size_t datatype_size(int datatype);
int datatype_is_float(int datatype);
int datatype_is_signed(int datatype);

/* Element i of the buffer, as a double (bool: 0 or 1). */
double load_value(int datatype, const void* buffer, size_t i);
/* Stores value (exactly representable by the caller's choice) as element i. */
void store_value(int datatype, void* buffer, size_t i, double value);
/* value rounded to what the datatype holds (for floating point) or truncated (integers). */
double round_to(int datatype, double value);

/* Inputs and results of reductions, by libcomm's rules (docs/design/reduce.md), for `size`
 * ranks: rank r's element i is small enough that sums and products are exact in every datatype.
 * Ops in the shared numbering: sum 0, product 1, max 2, min 3, avg 4, and libcomm's band 5,
 * bor 6, bxor 7. reduction_matches allows rounding for float averages only. */
int op_is_bitwise(int op);
double reduction_input(int datatype, int op, int r, size_t i);
double reduction_result(int datatype, int op, int size, size_t i);
int reduction_matches(int datatype, int op, double got, double expected);

#endif
