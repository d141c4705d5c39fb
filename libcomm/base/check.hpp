// Precondition checks: one macro that throws the comm::Error subclass asked for, with the
// file and line of the check appended so a report points at the exact rule that fired.
#pragma once

#include <exception>
#include <string>

#include "comm/error.hpp"

namespace comm::detail {

std::string with_location(const std::string& message, const char* file, int line);

// The Error subclass of `code`, as an exception_ptr: for errors that crossed a process boundary
// (a peer's Goodbye says what stopped it) and are raised again here with their own type.
std::exception_ptr error_of_code(ErrorCode code, std::string message, ErrorContext context);

}  // namespace comm::detail

// COMM_CHECK(condition, ErrorClass, context, message): the message is only built on failure.
#define COMM_CHECK(condition, ErrorClass, context, message)                                      \
  do {                                                                                           \
    if (!(condition)) [[unlikely]] {                                                             \
      throw ErrorClass(::comm::detail::with_location((message), __FILE__, __LINE__), (context)); \
    }                                                                                            \
  } while (false)
