#include "libcomm/base/check.hpp"

#include <cstring>

namespace comm::detail {

std::string with_location(const std::string& message, const char* file, int line) {
  // Keep the path from the source root on: absolute build paths say nothing to a user.
  const char* shown = file;
  for (const char* root : {"libcomm/", "rendezvous/", "transport/", "algorithms/", "cuda/"}) {
    if (const char* found = std::strstr(file, root)) {
      shown = found;
      break;
    }
  }
  return message + " (" + shown + ":" + std::to_string(line) + ")";
}

std::exception_ptr error_of_code(ErrorCode code, std::string message, ErrorContext context) {
  switch (code) {
    case ErrorCode::InvalidArgument: return std::make_exception_ptr(InvalidArgumentError(std::move(message), context));
    case ErrorCode::Timeout: return std::make_exception_ptr(TimeoutError(std::move(message), context));
    case ErrorCode::Io: return std::make_exception_ptr(IoError(std::move(message), context));
    case ErrorCode::PeerClosed: return std::make_exception_ptr(PeerClosedError(std::move(message), context));
    case ErrorCode::Mismatch: return std::make_exception_ptr(MismatchError(std::move(message), context));
    case ErrorCode::Cuda: return std::make_exception_ptr(CudaError(std::move(message), context));
    case ErrorCode::Revoked: return std::make_exception_ptr(RevokedError(std::move(message), context));
    case ErrorCode::Internal: break;
  }
  return std::make_exception_ptr(InternalError(std::move(message), context));
}

}  // namespace comm::detail
