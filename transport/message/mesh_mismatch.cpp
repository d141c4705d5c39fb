// Collective mismatches seen by the transport: a message or probe whose call fingerprint
// differs from that of the receive of the same slot fails it with an error naming both calls.
#include "transport/message/mesh_transport.hpp"

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"

namespace comm::transport {

std::optional<MeshTransport::Disagreement> MeshTransport::disagreement(const PostedReceive& receive) const {
  if (receive.fingerprint == 0) return std::nullopt;  // a send/recv: no call to disagree with
  if (const UnexpectedMessage* message = matcher_.find_conflicting(receive)) {
    return Disagreement{message->source, message->fingerprint};
  }
  for (int source = 0; source < size_; ++source) {
    const Channel& channel = channels_[source];
    if ((receive.source == kAnySource || receive.source == source) && same_call(channel.probe_tag(), receive.tag) &&
        conflicting(channel.probe_fingerprint(), receive.fingerprint)) {
      return Disagreement{source, channel.probe_fingerprint()};
    }
  }
  return std::nullopt;
}

std::exception_ptr MeshTransport::conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  if (peer < 0 || peer >= size_ || peer == rank_) return nullptr;
  auto other = disagreement({peer, tag, nullptr, 0, nullptr, fingerprint, {}});
  return other ? mismatch_error(fingerprint, other->source, other->fingerprint) : nullptr;
}

// Fails the posted receives of the same call as a message that disagrees with them.
void MeshTransport::fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint) {
  for (auto& receive : matcher_.take_conflicting_receives(source, tag, fingerprint)) {
    fail_mismatch(receive, source, fingerprint);
  }
}

void MeshTransport::note_call(std::uint64_t tag, std::uint64_t fingerprint) {
  if (!calls_.note(tag, fingerprint) || failures_.stopped()) return;
  poll_due_.store(true, std::memory_order_relaxed);  // poll() compares what arrived before
  // Messages and probes of this call that arrived before it began, from any peer (a peer that
  // thinks another rank is the root sends to ranks that will never receive from it).
  if (auto other = disagreement({kAnySource, tag, nullptr, 0, nullptr, fingerprint, {}})) {
    fail_on_mismatch(other->source, fingerprint, other->fingerprint);
  }
}

bool MeshTransport::contradicts_my_call(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
  std::uint64_t mine = calls_.contradiction(tag, fingerprint);
  if (mine == 0) return false;
  fail_on_mismatch(peer, mine, fingerprint);
  return true;
}

// Stops this transport with the mismatch, which every peer then gets as its own error. Inside a
// peer's receive() the connection must outlive the call: MeshTransport::service does it once that unwinds.
void MeshTransport::fail_on_mismatch(int peer, std::uint64_t mine, std::uint64_t theirs) {
  std::exception_ptr error = mismatch_error(mine, peer, theirs);
  if (servicing_peer_ >= 0) {
    if (!pending_mismatch_) pending_mismatch_ = error;
    return;
  }
  shut_down_on(error);
}

void MeshTransport::shut_down_on(std::exception_ptr mismatch) {
  try {
    std::rethrow_exception(mismatch);
  } catch (const Error& error) {
    log::get(log::Subsystem::Transport).error("{}", error.what());
    stop_over(error);
  }
}

}  // namespace comm::transport
