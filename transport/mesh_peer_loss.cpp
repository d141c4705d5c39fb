// A peer lost (its stream failed, or it said Goodbye) and this rank aborting: everything
// pending with that peer fails with the reason, and nothing waits on it again.
#include "transport/mesh_transport.hpp"

#include "comm/error.hpp"
#include "libcomm/base/log.hpp"

namespace comm::transport {

std::exception_ptr MeshTransport::failure(int peer) {
  std::lock_guard lock(mutex_);
  if (aborted_) return aborted_;
  return peer >= 0 && peer < size_ && peer != rank_ ? peers_[peer].error : nullptr;
}

bool MeshTransport::all_peers_lost() const {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && peers_[peer].connection) return false;
  }
  return size_ > 1;
}

void MeshTransport::lose_peer(int peer, std::exception_ptr error) {
  Peer& state = peers_[peer];
  if (state.departing) {
    std::string why =
        state.goodbye_reason.empty() ? "it finished, aborted, or destroyed the group" : state.goodbye_reason;
    error = make_error<PeerClosedError>(
        peer_name(peer) + " has shut down its process group (" + why + ") while this operation still needed it", peer,
        "transport");
  } else {
    try {
      std::rethrow_exception(error);
    } catch (Error& cause) {
      cause.add_context(ErrorContext{.rank = rank_, .peer = peer});
      if (!aborted_) log::get(log::Subsystem::Transport).warn("{}", cause.what());
      error = std::make_exception_ptr(cause);
    } catch (...) {
    }
  }
  if (!state.error) state.error = error;
  if (state.connection) {
    progress_.unwatch(state.connection->fd());
    for (auto& completion : state.connection->take_queued()) completion->fail(error);
    state.connection.reset();
  }
  for (auto& [id, send] : state.awaiting_clearance) send.completion->fail(error);
  state.awaiting_clearance.clear();
  for (auto& [id, receive] : state.cleared) receive.completion->fail(error);
  state.cleared.clear();
  if (state.arrival.receive) state.arrival.receive->completion->fail(error);
  state.arrival = {};
  for (auto& receive : matcher_.take_receives_from(peer, all_peers_lost())) receive.completion->fail(error);
  // Messages that fully arrived stay deliverable; half-arrived and announced ones never will be.
  for (auto& message : matcher_.take_incomplete_from(peer)) {
    if (message.claimed_by) message.claimed_by->completion->fail(error);
  }
}

void MeshTransport::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  say_goodbye(reason);
  if (!aborted_) aborted_ = make_error<PeerClosedError>("aborted: " + reason, -1, "transport");
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && peers_[peer].connection) lose_peer(peer, aborted_);
  }
  for (auto& receive : matcher_.take_receives_from(rank_, true)) receive.completion->fail(aborted_);
}

// Tells every live peer we are going, so it sees an orderly shutdown rather than a crash.
void MeshTransport::say_goodbye(const std::string& reason) {
  for (auto& state : peers_) {
    if (!state.connection) continue;
    state.connection->queue(make_frame(FrameKind::Goodbye, 0, reason.size()), reason.data(), nullptr);
    try {
      state.connection->flush();
    } catch (const Error&) {
      // That peer is gone already; nothing to tell it.
    }
  }
}

}  // namespace comm::transport
