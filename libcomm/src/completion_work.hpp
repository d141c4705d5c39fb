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

namespace comm::detail {

// What the operation is, for the error message of a timeout (no text is built otherwise).
struct WorkLabel {
  const char* op = "";
  int rank = -1;
  int peer = -1;  // -1: any source, or a collective
  std::int64_t tag = 0;
  std::size_t bytes = 0;
};

class CompletionWork final : public Work {
 public:
  // A null completion: the operation completed when it was started (label.bytes moved).
  CompletionWork(std::shared_ptr<Completion> completion, std::chrono::milliseconds timeout, WorkLabel label)
      : completion_(std::move(completion)), timeout_(timeout), label_(label) {}

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
};

}  // namespace comm::detail
