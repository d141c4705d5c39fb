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

void CompletionWork::wait() {
  if (wait_for(timeout_)) return;
  std::string what = std::string(label_.op) + " of " + std::to_string(label_.bytes) + " bytes";
  if (label_.peer >= 0)
    what += (std::string(label_.op) == "recv" ? " from rank " : " to rank ") + std::to_string(label_.peer);
  if (label_.peer < 0 && std::string(label_.op) == "recv") what += " from any source";
  what += " with tag " + std::to_string(label_.tag);
  throw TimeoutError(what + " did not complete within " + seconds_text(timeout_) +
                         "; check that the peer posts the matching call (same tag), or raise the timeout",
                     ErrorContext{.rank = label_.rank, .peer = label_.peer, .op = label_.op});
}

bool CompletionWork::wait_for(std::chrono::milliseconds timeout) {
  if (!completion_) return true;
  try {
    return completion_->wait_for(timeout);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = label_.rank, .op = label_.op});
    throw;
  }
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
