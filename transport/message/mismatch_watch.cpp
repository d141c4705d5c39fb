// Collective mismatches seen by the message layer: a message or probe whose call fingerprint
// differs from that of the receive of the same slot fails it with an error naming both calls.
#include "transport/message/mismatch_watch.hpp"

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"
#include "transport/message/peer_loss.hpp"
#include "transport/message/progress_engine.hpp"

namespace comm::transport {

std::optional<MismatchWatch::Disagreement> MismatchWatch::find_disagreement(const PostedReceive& receive) const {
  if (const UnexpectedMessage* message = matcher_.find_conflicting(receive)) {
    return Disagreement{message->source, message->fingerprint};
  }
  for (int source = 0; source < peers_.size(); ++source) {
    const Channel& channel = peers_[source];
    if ((receive.source == kAnySource || receive.source == source) && same_call(channel.probe_tag(), receive.tag) &&
        conflicting(channel.probe_fingerprint(), receive.fingerprint)) {
      return Disagreement{source, channel.probe_fingerprint()};
    }
  }
  return std::nullopt;
}

std::exception_ptr MismatchWatch::conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) const {
  if (peer < 0 || peer >= peers_.size() || peer == peers_.rank()) return nullptr;
  auto other = disagreement({peer, tag, nullptr, 0, nullptr, fingerprint, {}});
  return other ? error(fingerprint, other->source, other->fingerprint) : nullptr;
}

void MismatchWatch::fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint) {
  for (auto& receive : matcher_.take_conflicting_receives(source, tag, fingerprint)) {
    fail(receive, source, fingerprint);
  }
}

void MismatchWatch::compare_new_call(std::uint64_t tag, std::uint64_t fingerprint) {
  if (loss_.stopped()) return;
  // Messages and probes of this call that arrived before it began, from any peer (a peer that
  // thinks another rank is the root sends to ranks that will never receive from it).
  if (auto other = disagreement({kAnySource, tag, nullptr, 0, nullptr, fingerprint, {}})) {
    stop_over(other->source, fingerprint, other->fingerprint);
  }
}

// Stops this rank with the mismatch, which every peer then gets as its own error. Inside a
// peer's read the connection must outlive the call: handle_pending does it once that unwinds.
void MismatchWatch::stop_over(int peer, std::uint64_t mine, std::uint64_t theirs) {
  std::exception_ptr mismatch = error(mine, peer, theirs);
  if (engine_.servicing()) {
    if (!pending_) pending_ = mismatch;
    return;
  }
  stop_over(mismatch);
}

void MismatchWatch::stop_over(const std::exception_ptr& mismatch) {
  try {
    std::rethrow_exception(mismatch);
  } catch (const Error& error) {
    log::get(log::Subsystem::Transport).error("{}", error.what());
    loss_.stop_over(error);
  }
}

}  // namespace comm::transport
