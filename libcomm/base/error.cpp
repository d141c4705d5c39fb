#include "comm/error.hpp"

#include <utility>

namespace comm {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Io: return "I/O error";
    case ErrorCode::PeerClosed: return "peer closed";
    case ErrorCode::Mismatch: return "mismatch";
    case ErrorCode::Cuda: return "CUDA error";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::Revoked: return "revoked";
  }
  return "unknown error";
}

Error::Error(ErrorCode code, std::string message, ErrorContext context)
    : std::runtime_error(message), code_(code), message_(std::move(message)), context_(std::move(context)) {
  render();
}

void Error::add_context(const ErrorContext& outer) {
  if (context_.rank < 0) context_.rank = outer.rank;
  if (context_.peer < 0) context_.peer = outer.peer;
  if (context_.op.empty()) context_.op = outer.op;
  if (context_.sequence < 0) context_.sequence = outer.sequence;
  render();
}

void Error::render() {
  std::string text;
  if (context_.rank >= 0) text += "[rank " + std::to_string(context_.rank) + "] ";
  if (!context_.op.empty()) {
    text += context_.op;
    if (context_.sequence >= 0) text += " #" + std::to_string(context_.sequence);
    if (context_.peer >= 0) text += " with peer " + std::to_string(context_.peer);
    text += ": ";
  } else if (context_.peer >= 0) {
    text += "peer " + std::to_string(context_.peer) + ": ";
  }
  text += message_;
  rendered_ = std::move(text);
}

}  // namespace comm
