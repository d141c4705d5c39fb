// The comm::Error family: every failure libcomm reports is one of these exceptions.
//
// An error carries a code (what kind of failure), and the context a user needs to act on it:
// the rank that raised it, the peer or key involved, the operation and its sequence number.
// what() renders all of that in one line, e.g.
//   "[rank 2] store.get: timed out after 30s waiting for key 'init/done' (...what to do...)"
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace comm {

// Codes travel between ranks (a peer's error is raised here as its own kind): new ones go last.
enum class ErrorCode { InvalidArgument, Timeout, Io, PeerClosed, Mismatch, Cuda, Internal, Revoked };

const char* to_string(ErrorCode code);

struct ErrorContext {
  int rank = -1;               // the rank that raised the error; -1: not known (e.g. a bare store)
  int peer = -1;               // the other rank involved; -1: none
  std::string op{};            // e.g. "store.get", "init_process_group"
  std::int64_t sequence = -1;  // the operation's sequence number in its group; -1: none
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, ErrorContext context = {});

  ErrorCode code() const noexcept { return code_; }
  int rank() const noexcept { return context_.rank; }
  int peer() const noexcept { return context_.peer; }
  const std::string& op() const noexcept { return context_.op; }
  std::int64_t sequence() const noexcept { return context_.sequence; }
  const ErrorContext& context() const noexcept { return context_; }
  // The message without the rendered context.
  const std::string& message() const noexcept { return message_; }

  // Outer layers fill in what an inner layer could not know (a store does not know its rank).
  // Only unset fields are filled, so the innermost knowledge wins.
  void add_context(const ErrorContext& outer);

  const char* what() const noexcept override { return rendered_.c_str(); }

 private:
  void render();

  ErrorCode code_;
  std::string message_;
  ErrorContext context_;
  std::string rendered_;
};

// One subclass per code, so callers can catch exactly the failures they can handle.
#define COMM_DECLARE_ERROR(Name, Code)                                      \
  class Name : public Error {                                               \
   public:                                                                  \
    explicit Name(std::string message, ErrorContext context = {})           \
        : Error(ErrorCode::Code, std::move(message), std::move(context)) {} \
  };
COMM_DECLARE_ERROR(InvalidArgumentError, InvalidArgument)
COMM_DECLARE_ERROR(TimeoutError, Timeout)
COMM_DECLARE_ERROR(IoError, Io)
COMM_DECLARE_ERROR(PeerClosedError, PeerClosed)
COMM_DECLARE_ERROR(MismatchError, Mismatch)
COMM_DECLARE_ERROR(CudaError, Cuda)
COMM_DECLARE_ERROR(InternalError, Internal)
// The group was revoked (ProcessGroup::revoke, or a member's death): its calls fail until the
// survivors make a new group with shrink().
COMM_DECLARE_ERROR(RevokedError, Revoked)
#undef COMM_DECLARE_ERROR

}  // namespace comm
