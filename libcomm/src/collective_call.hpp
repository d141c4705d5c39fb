// How every collective call starts, on host or GPU buffers alike: a sequence number, the
// context its algorithm runs with, and, on failure, the group aborted so peers stop waiting.
#pragma once

#include <memory>

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/src/group.hpp"

namespace comm {

template <class Body>
std::shared_ptr<Work> ProcessGroup::Impl::start_collective(CallShape shape, std::size_t bytes,
                                                           std::uint64_t fingerprint, Body body, bool async) {
  const char* op = to_string(shape.collective);
  std::uint64_t sequence = collective_sequence_++;
  auto run = [this, op, shape, sequence, fingerprint, body = std::move(body)] {
    CallRecord* record = hang_watch_ ? &hang_watch_->record() : nullptr;
    algorithms::CollectiveContext context{
        *transport_, rank(),          size(), sequence,    timeout_,       op,
        layout_.id,  layout_.members, 0,      fingerprint, scratch_.get(), record ? record->waiting() : nullptr};
    // The hang watch sees the call from here to its end (a few stores to memory each way).
    struct InCall {
      CallRecord* record;
      ~InCall() {
        if (record) record->end();
      }
    } in_call{record};
    if (record) record->begin(shape, sequence);
    try {
      body(context);
    } catch (Error& error) {
      error.add_context(ErrorContext{.rank = rank(), .op = op, .sequence = static_cast<std::int64_t>(sequence)});
      if (error.code() == ErrorCode::Timeout && hang_watch_) {
        // The timeout's message is the verdict: where every rank of the group is now.
        std::string verdict = hang_watch_->verdict_now(timeout_) + " (" + error.message() + ")";
        TimeoutError timeout(verdict, error.context());
        transport_->abort(timeout.what(), &timeout);
        throw timeout;
      }
      // Transfers of the failed call may still be posted into its buffers, and peers may be
      // waiting for data this rank will not send: stop the transport, which tells them, so
      // nothing lands here later and nobody waits out a timeout (as with NCCL, a group is
      // unusable after a failed call). Argument checks fail before the call starts, not here:
      // an InvalidArgumentError here is the transport's (a message that did not fit).
      transport_->abort(error.what(), &error);
      throw;
    }
  };
  if (!async) {
    queue_->run(run);
    return nullptr;
  }
  auto completion = queue_->submit(std::move(run), bytes);
  return std::make_shared<detail::CompletionWork>(
      std::move(completion), timeout_, detail::WorkLabel{op, rank(), -1, static_cast<std::int64_t>(sequence), bytes});
}

// The call's fingerprint: what every rank must agree on (see libcomm/base/fingerprint.hpp).
inline std::uint64_t call_fingerprint(Collective collective, Algorithm algorithm, const Buffer* buffer, int op,
                                      int root, std::size_t count) {
  bool gpu = buffer != nullptr && buffer->device.kind == Device::Kind::Cuda;
  return detail::fingerprint(
      {static_cast<int>(collective), buffer ? static_cast<int>(buffer->dtype) : -1, op, algorithm, root, count, gpu});
}

}  // namespace comm
