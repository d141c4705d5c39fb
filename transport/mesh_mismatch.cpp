// Collective mismatches seen by the transport: a message or probe whose call fingerprint
// differs from that of the receive of the same slot fails it with an error naming both calls.
#include "transport/mesh_transport.hpp"

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"

namespace comm::transport {

std::exception_ptr MeshTransport::mismatch_error(std::uint64_t mine, int source, std::uint64_t theirs) const {
  return make_error<MismatchError>(
      "collective mismatch: this rank called " + detail::describe_fingerprint(mine) + " but " + peer_name(source) +
          " called " + detail::describe_fingerprint(theirs) +
          " in the same slot; every rank of a group must call the same collectives, in the same order, with matching "
          "arguments",
      source, "collective");
}

// Fails a receive whose call differs from the one a message of its slot came from.
void MeshTransport::fail_mismatch(const PostedReceive& receive, int source, std::uint64_t message_fingerprint) {
  receive.completion->fail(mismatch_error(receive.fingerprint, source, message_fingerprint));
}

std::exception_ptr MeshTransport::conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  if (peer < 0 || peer >= size_ || peer == rank_) return nullptr;
  const Peer& state = peers_[peer];
  if (same_call(state.probe_tag, tag) && conflicting(state.probe_fingerprint, fingerprint)) {
    return mismatch_error(fingerprint, peer, state.probe_fingerprint);
  }
  PostedReceive receive{peer, tag, nullptr, 0, nullptr, fingerprint, {}};
  if (const UnexpectedMessage* message = matcher_.find_conflicting(receive)) {
    return mismatch_error(fingerprint, peer, message->fingerprint);
  }
  return nullptr;
}

// Fails the posted receives of the same call as a message that disagrees with them.
void MeshTransport::fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint) {
  for (auto& receive : matcher_.take_conflicting_receives(source, tag, fingerprint)) {
    fail_mismatch(receive, source, fingerprint);
  }
}

}  // namespace comm::transport
