// A peer lost (its stream failed, or it said Goodbye) and this rank aborting: everything
// pending with that peer fails with the reason, and nothing waits on it again.
#include "transport/message/mesh_transport.hpp"

#include <algorithm>
#include <utility>

#include <chrono>
#include <thread>

#include "comm/error.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"

namespace comm::transport {
namespace {

// How long a transport that shuts down gives its last frames (the Goodbye) to leave.
constexpr auto kGoodbyeFlushTime = std::chrono::milliseconds(250);

}  // namespace

bool MeshTransport::all_peers_lost() const {
  for (int peer = 0; peer < size_; ++peer) {
    // Connected, or to be connected on first use.
    if (peer != rank_ && !channels_[peer].lost()) return false;
  }
  return size_ > 1;
}

// A write failed because the peer closed: it may have said why just before (a Goodbye naming a
// mismatch, say), and that, not "broken pipe", is what this rank's operations should fail with.
void MeshTransport::lose_after_write_error(int peer, std::exception_ptr error) {
  // Reads what the peer sent last (a goodbye naming the rank it stopped over, often), and loses
  // it properly at its end of file; not from inside another peer's receive(), which servicing
  // would unseat: then once that receive is over (MeshTransport::service).
  if (servicing_peer_ >= 0) {
    if (std::none_of(write_losses_.begin(), write_losses_.end(),
                     [&](const auto& loss) { return loss.first == peer; })) {
      write_losses_.emplace_back(peer, error);
    }
    return;
  }
  driver_.service(peer);
  if (channels_[peer].connection()) lose_peer(peer, error);
}

void MeshTransport::lose_peer(int peer, std::exception_ptr error) {
  Channel& channel = channels_[peer];
  error = channel.loss_error(error, rank_, peer, peer_name(peer), failures_.stopped() != nullptr);
  // (The channel keeps the first error it had; what is pending now fails with this one.)
  int fd = channel.fail_all(error);
  if (fd >= 0) progress_.unwatch(fd);
  for (auto& receive : matcher_.take_receives_from(peer, all_peers_lost())) receive.completion->fail(error);
  // Messages that fully arrived stay deliverable; half-arrived and announced ones never will be.
  for (auto& message : matcher_.take_incomplete_from(peer)) {
    if (message.claimed_by) message.claimed_by->completion->fail(error);
  }
  // A peer that left after its work was done (a Goodbye naming no error) revokes nothing: the
  // others may go on without it.
  if (!channel.left_in_order()) revoke_groups_of(peer, error);
}

// This rank and its peers fail with the cause itself (of its type, with its message, about the
// rank it names), not with "rank r aborted" around it.
void MeshTransport::stop_over(const Error& cause) {
  shut_down(detail::error_of_code(cause.code(), cause.message(), ErrorContext{.rank = rank_, .peer = cause.peer()}),
            cause.message(), 1 + static_cast<std::uint64_t>(cause.code()),
            cause.peer() >= 0 ? 1 + static_cast<std::uint64_t>(cause.peer()) : 0);
}

void MeshTransport::shut_down(std::exception_ptr error, const std::string& reason, std::uint64_t code,
                              std::uint64_t about) {
  failures_.say({reason, code, about});
  say_goodbye(reason, code, about);
  // What is queued before the Goodbye (a large message's data, say) gets a moment to leave, so
  // peers learn why rather than see an end of file; their input is dropped meanwhile, so a peer
  // blocked writing to us cannot block our writing to it.
  auto deadline = std::chrono::steady_clock::now() + kGoodbyeFlushTime;
  for (auto& channel : channels_) {
    StreamConnection* connection = channel.connection();
    if (connection == nullptr) continue;
    try {
      while (connection->has_output() && !connection->flush() && std::chrono::steady_clock::now() < deadline) {
        std::uint8_t discarded[4096];
        while (connection->stream().read_some(discarded, sizeof discarded) > 0) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      connection->stream().close_gracefully();
    } catch (const Error&) {
      // That peer is gone already; nothing to tell it.
    }
  }
  // Stopping over an error, the Goodbye names the cause: keep the connections until the peers
  // have closed theirs (they do once they read it), dropping their input meanwhile; a close with
  // input still arriving would reset the connection and destroy the Goodbye on the peer's side,
  // which would then blame this rank (within what is left of the flush time).
  while (code != 0 && std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (auto& channel : channels_) {
      if (channel.connection() && !channel.connection()->stream().drained_to_end()) all = false;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  failures_.stop(error);
  poll_due_.store(true, std::memory_order_relaxed);  // poll() reports the stop
  // Every peer not lost yet: connected, or (on first use) not yet.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && !channels_[peer].lost()) {
      lose_peer(peer, failures_.stopped());
    }
  }
  // The connector stays: a peer that connects later (on first use) hears the Goodbye too. The
  // handshakes under way are finished now (within the flush time), so that a peer whose side of
  // one is complete does not find it cut when this transport is destroyed.
  while (connector_ && connector_->busy() && std::chrono::steady_clock::now() < deadline) {
    advance_connections();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& receive : matcher_.take_receives_from(rank_, true)) receive.completion->fail(failures_.stopped());
}

// Tells every live peer we are going, and why (`code`: 1 + the ErrorCode of the cause, 0: none
// in particular), so it sees an orderly shutdown rather than a crash.
void MeshTransport::say_goodbye(const std::string& reason, std::uint64_t code, std::uint64_t about) {
  for (auto& channel : channels_) {
    StreamConnection* connection = channel.connection();
    if (connection == nullptr) continue;
    connection->queue(make_frame(FrameKind::Goodbye, 0, reason.size(), about, code), reason.data(), nullptr);
    try {
      connection->flush();
    } catch (const Error&) {
      // That peer is gone already; nothing to tell it.
    }
  }
}

std::exception_ptr MeshTransport::failure(int peer) {
  std::lock_guard lock(mutex_);
  if (failures_.stopped()) return failures_.stopped();
  return peer >= 0 && peer < size_ && peer != rank_ ? channels_[peer].error() : nullptr;
}

void MeshTransport::abort(const std::string& reason, const Error* cause) {
  std::lock_guard lock(mutex_);
  if (cause != nullptr) return stop_over(*cause);
  // Stopping (destroyed, say) after a revocation no new group followed: the peers hear its cause.
  if (!failures_.stopped() && revocations_.unrecovered()) return stop_over(*revocations_.unrecovered());
  shut_down(make_error<PeerClosedError>("aborted: " + reason, -1, "transport"), reason, 0);
}

}  // namespace comm::transport
