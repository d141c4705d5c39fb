#include "libcomm/src/completion_work.hpp"

#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/base/duration_text.hpp"

namespace comm::detail {

bool CompletionWork::is_completed() {
  if (!completion_) return true;
  if (!completion_->done()) {
    // Nobody may be driving progress for this process right now: give it a nudge.
    completion_->wait_for(std::chrono::nanoseconds(0));
  }
  return completion_->done();
}

void throw_timeout(const WorkLabel& label, std::chrono::milliseconds timeout) {
  std::string what = std::string(label.op) + " of " + std::to_string(label.bytes) + " bytes";
  if (label.peer >= 0)
    what += (std::string(label.op) == "recv" ? " from rank " : " to rank ") + std::to_string(label.peer);
  if (label.peer < 0 && std::string(label.op) == "recv") what += " from any source";
  what += " with tag " + std::to_string(label.tag);
  throw TimeoutError(what + " did not complete within " + seconds_text(timeout) +
                         "; check that the peer posts the matching call (same tag), or raise the timeout",
                     ErrorContext{.rank = label.rank, .peer = label.peer, .op = label.op});
}

bool wait_labelled(Completion& completion, std::chrono::milliseconds timeout, const WorkLabel& label) {
  try {
    return completion.wait_for(timeout);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = label.rank, .op = label.op});
    throw;
  }
}

void CompletionWork::wait() {
  if (!wait_for(timeout_)) throw_timeout(label_, timeout_);
}

bool CompletionWork::wait_for(std::chrono::milliseconds timeout) {
  return !completion_ || wait_labelled(*completion_, timeout, label_);
}

// A named source is known without asking the transport, whose numbering a subgroup does not share.
int CompletionWork::source_rank() const {
  return label_.peer >= 0 || !completion_ ? label_.peer : completion_->source();
}

void CompletionWork::on_completion(std::function<void()> callback) {
  if (!completion_) return callback();
  completion_->when_done(std::move(callback));
}

std::size_t CompletionWork::bytes() const { return completion_ ? completion_->bytes() : label_.bytes; }

}  // namespace comm::detail
