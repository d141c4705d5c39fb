#include "libcomm/src/completion_work.hpp"

#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/src/trace_dump.hpp"

namespace comm::detail {

CompletionWork::~CompletionWork() {
  if (entry_ && completion_ && completion_->done()) record_end();
}

void CompletionWork::record_end() {
  if (!entry_) return;
  trace::Handle entry = entry_;
  entry_ = {};
  if (!completion_->failed()) return entry.finish(trace::State::Completed);
  try {
    completion_->rethrow_if_failed();
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
  }
}

bool CompletionWork::is_completed() {
  if (!completion_) return true;
  if (!completion_->done()) {
    // Nobody may be driving progress for this process right now: give it a nudge.
    try {
      completion_->wait_for(std::chrono::nanoseconds(0));
    } catch (const std::exception&) {
      record_end();
      throw;
    }
  }
  bool done = completion_->done();
  if (done && entry_) record_end();
  return done;
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
  if (!completion_) return true;
  try {
    bool done = wait_labelled(*completion_, timeout, label_);
    if (done && entry_) record_end();
    return done;
  } catch (const std::exception&) {
    record_end();
    throw;
  }
}

// A named source is known without asking the transport, whose numbering a subgroup does not share.
int CompletionWork::source_rank() const {
  return label_.peer >= 0 || !completion_ ? label_.peer : completion_->source();
}

void CompletionWork::on_completion(std::function<void()> callback) {
  if (!completion_) return callback();
  if (entry_) {
    // The callback runs on the completing thread, while the completion lives.
    callback = [entry = entry_, completion = completion_.get(), callback = std::move(callback)] {
      entry.finish(completion->failed() ? trace::State::Failed : trace::State::Completed);
      callback();
    };
    entry_ = {};
  }
  completion_->when_done(std::move(callback));
}

std::size_t CompletionWork::bytes() const { return completion_ ? completion_->bytes() : label_.bytes; }

}  // namespace comm::detail
