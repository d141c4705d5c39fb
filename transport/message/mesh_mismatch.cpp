// Collective mismatches seen by the transport: a message or probe whose call fingerprint
// differs from that of the receive of the same slot fails it with an error naming both calls.
#include "transport/message/mesh_transport.hpp"

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"

namespace comm::transport {

std::exception_ptr MeshTransport::Mismatches::mismatch_error(std::uint64_t mine, int source,
                                                             std::uint64_t theirs) const {
  return mesh_.make_error<MismatchError>(
      "collective mismatch: rank " + std::to_string(mesh_.rank_) + " called " + detail::describe_fingerprint(mine) +
          " but " + mesh_.peer_name(source) + " called " + detail::describe_fingerprint(theirs) +
          " in the same slot; every rank of a group must call the same collectives, in the same order, with matching "
          "arguments",
      source, "collective");
}

// Fails a receive whose call differs from the one a message of its slot came from.
void MeshTransport::Mismatches::fail_mismatch(const PostedReceive& receive, int source,
                                              std::uint64_t message_fingerprint) {
  receive.completion->fail(mismatch_error(receive.fingerprint, source, message_fingerprint));
}

std::optional<MeshTransport::Mismatches::Disagreement> MeshTransport::Mismatches::disagreement(
    const PostedReceive& receive) const {
  if (receive.fingerprint == 0) return std::nullopt;  // a send/recv: no call to disagree with
  if (const UnexpectedMessage* message = mesh_.matcher_.find_conflicting(receive)) {
    return Disagreement{message->source, message->fingerprint};
  }
  for (int source = 0; source < mesh_.size_; ++source) {
    const Channel& channel = mesh_.channels_[source];
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
  auto other = mismatches_.disagreement({peer, tag, nullptr, 0, nullptr, fingerprint, {}});
  return other ? mismatches_.mismatch_error(fingerprint, other->source, other->fingerprint) : nullptr;
}

// Fails the posted receives of the same call as a message that disagrees with them.
void MeshTransport::Mismatches::fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint) {
  for (auto& receive : mesh_.matcher_.take_conflicting_receives(source, tag, fingerprint)) {
    fail_mismatch(receive, source, fingerprint);
  }
}

namespace {

// Where a call's record lives in Mismatches::calls_: a call's slot is its group id and its
// sequence number, and a group's calls run in order, so neighbours never collide.
std::size_t record_index(std::uint64_t slot, std::size_t records) {
  return static_cast<std::size_t>((slot ^ (slot >> 32) * 31) % records);
}

}  // namespace

void MeshTransport::Mismatches::note_call(std::uint64_t tag, std::uint64_t fingerprint) {
  if (fingerprint == 0 || (tag >> 63) == 0 || mesh_.aborted_) return;
  std::uint64_t slot = tag >> 16;
  CallRecord& record = calls_[record_index(slot, kRecordedCalls)];
  if (record.slot == slot) return;  // this call's every transfer after its first
  record = {slot, fingerprint};
  mesh_.poll_due_.store(true, std::memory_order_relaxed);  // poll() compares what arrived before
  // Messages and probes of this call that arrived before it began, from any peer (a peer that
  // thinks another rank is the root sends to ranks that will never receive from it).
  if (auto other = disagreement({kAnySource, tag, nullptr, 0, nullptr, fingerprint, {}})) {
    fail_on_mismatch(other->source, fingerprint, other->fingerprint);
  }
}

bool MeshTransport::Mismatches::contradicts_my_call(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
  if (fingerprint == 0 || (tag >> 63) == 0) return false;  // not a collective's message
  std::uint64_t slot = tag >> 16;
  const CallRecord& record = calls_[record_index(slot, kRecordedCalls)];
  if (record.slot != slot || !conflicting(record.fingerprint, fingerprint)) return false;
  fail_on_mismatch(peer, record.fingerprint, fingerprint);
  return true;
}

// Stops this transport with the mismatch, which every peer then gets as its own error. Inside a
// peer's receive() the connection must outlive the call: MeshTransport::service does it once that unwinds.
void MeshTransport::Mismatches::fail_on_mismatch(int peer, std::uint64_t mine, std::uint64_t theirs) {
  std::exception_ptr error = mismatch_error(mine, peer, theirs);
  if (mesh_.servicing_peer_ >= 0) {
    if (!mesh_.pending_mismatch_) mesh_.pending_mismatch_ = error;
    return;
  }
  shut_down_on(error);
}

void MeshTransport::Mismatches::shut_down_on(std::exception_ptr mismatch) {
  try {
    std::rethrow_exception(mismatch);
  } catch (const Error& error) {
    log::get(log::Subsystem::Transport).error("{}", error.what());
    mesh_.peer_loss_.stop_over(error);
  }
}

}  // namespace comm::transport
