// Precondition checks: one macro that throws the comm::Error subclass asked for, with the
// file and line of the check appended so a report points at the exact rule that fired.
#pragma once

#include <string>

#include "comm/error.hpp"

namespace comm::detail {

std::string with_location(const std::string& message, const char* file, int line);

}  // namespace comm::detail

// COMM_CHECK(condition, ErrorClass, context, message): the message is only built on failure.
#define COMM_CHECK(condition, ErrorClass, context, message)                                      \
  do {                                                                                           \
    if (!(condition)) [[unlikely]] {                                                             \
      throw ErrorClass(::comm::detail::with_location((message), __FILE__, __LINE__), (context)); \
    }                                                                                            \
  } while (false)
