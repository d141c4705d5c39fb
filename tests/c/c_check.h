/* What the C API's tests share: checks that count failures and say which rank saw them, and
 * values of every comm_datatype_t read and written as doubles (float16 and bfloat16 converted
 * here, round to nearest even), so that references can be computed in double. C99. */
#ifndef COMM_TESTS_C_CHECK_H
#define COMM_TESTS_C_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm/comm.h"

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

/* A call that must succeed; on failure, says the code and the last error. */
#define CHECK_OK(call)                                                                                    \
  do {                                                                                                    \
    comm_result_t checked_result_ = (call);                                                               \
    CHECK(checked_result_ == COMM_SUCCESS, "%s -> %s: %s", #call, comm_get_error_string(checked_result_), \
          comm_get_last_error(NULL));                                                                     \
  } while (0)

/* Prints "<name>: N checks, N failed" and returns the exit status. */
int check_summary(const char* name);

extern const comm_datatype_t all_datatypes[];
extern const size_t all_datatype_count;
const char* datatype_name(comm_datatype_t datatype);
size_t datatype_size(comm_datatype_t datatype);
int datatype_is_float(comm_datatype_t datatype);
int datatype_is_signed(comm_datatype_t datatype);

/* Element i of the buffer, as a double (bool: 0 or 1). */
double load_value(comm_datatype_t datatype, const void* buffer, size_t i);
/* Stores value (exactly representable by the caller's choice) as element i. */
void store_value(comm_datatype_t datatype, void* buffer, size_t i, double value);
/* value rounded to what the datatype holds (for floating point) or truncated (integers). */
double round_to(comm_datatype_t datatype, double value);

#endif
