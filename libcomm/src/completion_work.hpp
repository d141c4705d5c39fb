// The one kind of Work the library hands out: a Completion the transport or the group's queue
// finishes, the group's timeout, and what the operation is (for the message of a timeout).
// Blocking calls keep one on their stack.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/work.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/base/flight_recorder.hpp"

namespace comm::detail {

// What the operation is, for the error message of a timeout (no text is built otherwise).
struct WorkLabel {
  const char* op = "";
  int rank = -1;
  int peer = -1;  // -1: any source, or a collective
  std::int64_t tag = 0;
  std::size_t bytes = 0;
};

// The TimeoutError of an operation that did not complete within `timeout`.
[[noreturn]] void throw_timeout(const WorkLabel& label, std::chrono::milliseconds timeout);
// Waits for `completion` up to `timeout` (false: it did not complete); a failure's error gains
// the label's rank and operation.
bool wait_labelled(Completion& completion, std::chrono::milliseconds timeout, const WorkLabel& label);

class CompletionWork final : public Work {
 public:
  // A null completion: the operation completed when it was started (label.bytes moved).
  // `entry`: the operation's flight recorder entry, finished when its end is seen here.
  CompletionWork(std::shared_ptr<Completion> completion, std::chrono::milliseconds timeout, WorkLabel label,
                 trace::Handle entry = {})
      : completion_(std::move(completion)), timeout_(timeout), label_(label), entry_(entry) {}
  ~CompletionWork() override;
  CompletionWork(CompletionWork&& other) noexcept
      : completion_(std::move(other.completion_)), timeout_(other.timeout_), label_(other.label_), entry_(other.entry_) {
    other.entry_ = {};
  }
  CompletionWork(const CompletionWork&) = delete;
  CompletionWork& operator=(const CompletionWork&) = delete;
  CompletionWork& operator=(CompletionWork&&) = delete;

  bool is_completed() override;
  void wait() override;
  bool wait_for(std::chrono::milliseconds timeout) override;
  int source_rank() const override;
  std::size_t bytes() const override;
  void on_completion(std::function<void()> callback) override;

 private:
  std::shared_ptr<Completion> completion_;
  std::chrono::milliseconds timeout_;
  WorkLabel label_;
  // Finished (then cleared) once the completion's end is seen: a wait, a test, a callback, or
  // this Work going away.
  trace::Handle entry_;
  void record_end();
};

}  // namespace comm::detail
