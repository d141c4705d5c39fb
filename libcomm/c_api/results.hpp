// How the C API reports failures: whatever a call throws (the comm::Error family, a failure the
// C layer finds itself, anything else) becomes a comm_result_t, and its message becomes the last
// error of the calling thread and of the communicator. Nothing thrown crosses into C.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "comm/comm.h"

namespace comm::c_api {

// A failure the C layer finds itself (a NULL pointer, an unknown datatype), with its code.
class CallError : public std::runtime_error {
 public:
  CallError(comm_result_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  comm_result_t code() const noexcept { return code_; }

 private:
  comm_result_t code_;
};

// The code of the exception in flight, its message remembered for `comm` (may be null) and for
// this thread; `operation` names the C function.
comm_result_t fail(comm_communicator* comm, const char* operation) noexcept;
const char* last_error_of_thread() noexcept;

// Throws CallError(COMM_INVALID_ARGUMENT) naming how `comm` ended when it was destroyed or aborted.
void require_live(const comm_communicator* comm);

// Runs `body` (which returns a comm_result_t) unless `comm` (when given) has ended; an exception
// becomes its code.
template <class Body>
comm_result_t guarded(comm_communicator* comm, const char* operation, Body&& body) noexcept {
  try {
    if (comm) require_live(comm);
    return body();
  } catch (...) {
    return fail(comm, operation);
  }
}

// Throws CallError(code, message) unless `condition`.
inline void require(bool condition, comm_result_t code, const char* message) {
  if (!condition) [[unlikely]]
    throw CallError(code, message);
}

}  // namespace comm::c_api
