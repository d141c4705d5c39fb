#include "comm/work.hpp"

#include "comm/error.hpp"
#include "completion.hpp"
#include "store_format.hpp"

namespace comm {

Work::Work(std::shared_ptr<detail::Completion> completion, std::chrono::milliseconds timeout, detail::WorkLabel label)
    : completion_(std::move(completion)), timeout_(timeout), label_(label) {}

Work::~Work() = default;

bool Work::is_completed() {
  if (!completion_) return true;
  if (!completion_->done()) {
    // Nobody may be driving progress for this process right now: give it a nudge.
    completion_->wait_for(std::chrono::nanoseconds(0));
  }
  return completion_->done();
}

void Work::wait() {
  if (wait_for(timeout_)) return;
  std::string what = std::string(label_.op) + " of " + std::to_string(label_.bytes) + " bytes";
  if (label_.peer >= 0) what += (std::string(label_.op) == "recv" ? " from rank " : " to rank ") + std::to_string(label_.peer);
  if (label_.peer < 0 && std::string(label_.op) == "recv") what += " from any source";
  what += " with tag " + std::to_string(label_.tag);
  throw TimeoutError(what + " did not complete within " + store_format::seconds(timeout_) +
                         "; check that the peer posts the matching call (same tag), or raise the timeout",
                     ErrorContext{.rank = label_.rank, .peer = label_.peer, .op = label_.op});
}

bool Work::wait_for(std::chrono::milliseconds timeout) {
  if (!completion_) return true;
  try {
    return completion_->wait_for(timeout);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = label_.rank, .op = label_.op});
    throw;
  }
}

// A named source is known without asking the transport, whose numbering a subgroup does not share.
int Work::source_rank() const {
  return label_.peer >= 0 || !completion_ ? label_.peer : completion_->source();
}

std::size_t Work::bytes() const { return completion_ ? completion_->bytes() : label_.bytes; }

}  // namespace comm
