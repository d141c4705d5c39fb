#include "libcomm/c_api/results.hpp"

#include <new>

#include "libcomm/c_api/communicator.hpp"

namespace comm::c_api {
namespace {

thread_local std::string thread_last_error;

comm_result_t code_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return COMM_INVALID_ARGUMENT;
    case ErrorCode::Mismatch: return COMM_INVALID_USAGE;  // ranks called different things
    case ErrorCode::Timeout: return COMM_REMOTE_ERROR;    // a peer did not answer in time
    case ErrorCode::PeerClosed: return COMM_REMOTE_ERROR;
    case ErrorCode::Revoked: return COMM_REMOTE_ERROR;  // a rank revoked the group, or one died
    case ErrorCode::Io: return COMM_SYSTEM_ERROR;
    case ErrorCode::Cuda: return COMM_CUDA_ERROR;
    case ErrorCode::Internal: return COMM_INTERNAL_ERROR;
  }
  return COMM_INTERNAL_ERROR;
}

}  // namespace

comm_result_t fail(comm_communicator* comm, const char* operation) noexcept {
  comm_result_t code = COMM_INTERNAL_ERROR;
  std::string message;
  try {
    try {
      throw;
    } catch (const Error& error) {
      code = code_of(error.code());
      message = error.what();
    } catch (const CallError& error) {
      code = error.code();
      message = std::string(operation) + ": " + error.what();
      if (comm) message = "[rank " + std::to_string(comm->rank) + "] " + message;
    } catch (const std::bad_alloc&) {
      code = COMM_SYSTEM_ERROR;
      message = std::string(operation) + ": out of memory";
    } catch (const std::exception& error) {
      message = std::string(operation) + ": " + error.what();
    } catch (...) {
      message = std::string(operation) + ": an unknown exception";
    }
    thread_last_error = message;
    if (comm) {
      comm->set_last_error(message);
      // A peer gone or ranks disagreeing end the communicator; a bad argument does not.
      if (code == COMM_REMOTE_ERROR || code == COMM_SYSTEM_ERROR || code == COMM_INVALID_USAGE) {
        comm->set_async_error(code);
      }
    }
  } catch (...) {  // no memory left even for the message: the code still tells
  }
  return code;
}

const char* last_error_of_thread() noexcept { return thread_last_error.c_str(); }

}  // namespace comm::c_api
