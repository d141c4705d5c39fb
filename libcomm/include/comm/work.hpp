// Work: a handle to an operation in flight (isend, irecv, and the i-forms of collectives).
//
// wait() returns when the operation completed and rethrows its comm::Error if it failed; it
// gives up with a TimeoutError naming the peer and tag after the group's timeout. wait_for()
// returns false at its own timeout without cancelling anything. A Work may be waited on from
// any thread, more than once. Buffers handed to the operation must stay untouched until it
// completes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace comm {

namespace detail {
class Completion;  // the shared state the library completes (libcomm/base/completion.hpp)

// What the operation is, for the error message of a timeout (no text is built otherwise).
struct WorkLabel {
  const char* op = "";
  int rank = -1;
  int peer = -1;  // -1: any source, or a collective
  std::int64_t tag = 0;
  std::size_t bytes = 0;
};
}  // namespace detail

class Work {
 public:
  // A null completion: the operation completed when it was started (label.bytes moved).
  Work(std::shared_ptr<detail::Completion> completion, std::chrono::milliseconds timeout, detail::WorkLabel label);
  ~Work();
  Work(Work&&) noexcept = default;
  Work& operator=(Work&&) noexcept = default;
  Work(const Work&) = default;
  Work& operator=(const Work&) = default;

  bool is_completed();
  void wait();
  bool wait_for(std::chrono::milliseconds timeout);
  // For a receive from kAnySource: the rank the message came from (after completion).
  int source_rank() const;
  // Bytes transferred (after completion).
  std::size_t bytes() const;

 private:
  std::shared_ptr<detail::Completion> completion_;
  std::chrono::milliseconds timeout_;
  detail::WorkLabel label_;
};

}  // namespace comm
