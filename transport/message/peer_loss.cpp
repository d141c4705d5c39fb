// A peer lost (its stream failed, or it said Goodbye) and this rank stopping: everything
// pending with that peer fails with the reason, and nothing waits on it again.
#include "transport/message/peer_loss.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "comm/error.hpp"
#include "libcomm/base/check.hpp"
#include "transport/message/mesh_groups.hpp"
#include "transport/message/progress_engine.hpp"

namespace comm::transport {
namespace {

// How long a transport that shuts down gives its last frames (the Goodbye) to leave.
constexpr auto kGoodbyeFlushTime = std::chrono::milliseconds(250);

}  // namespace

std::exception_ptr PeerLoss::failure(int peer) const {
  if (failures_.stopped()) return failures_.stopped();
  return peer >= 0 && peer < peers_.size() && peer != peers_.rank() ? peers_[peer].error() : nullptr;
}

void PeerLoss::lose_after_write_error(int peer, std::exception_ptr error) {
  // Reads what the peer sent last (a goodbye naming the rank it stopped over, often), and loses
  // it properly at its end of file; not from inside another peer's receive(), which servicing
  // would unseat: then once that receive is over (ProgressEngine::service).
  if (engine_.servicing()) {
    if (std::none_of(write_losses_.begin(), write_losses_.end(),
                     [&](const auto& loss) { return loss.first == peer; })) {
      write_losses_.emplace_back(peer, error);
    }
    return;
  }
  engine_.service(peer);
  if (peers_[peer].connection()) lose_peer(peer, error);
}

void PeerLoss::lose_deferred() {
  for (auto& [lost, error] : std::exchange(write_losses_, {})) lose_after_write_error(lost, error);
}

void PeerLoss::lose_peer(int peer, std::exception_ptr error) {
  Channel& channel = peers_[peer];
  error = channel.loss_error(error, peers_.rank(), peer, peers_.name(peer), failures_.stopped() != nullptr);
  // (The channel keeps the first error it had; what is pending now fails with this one.)
  int fd = channel.fail_all(error);
  if (fd >= 0) engine_.unwatch(fd);
  for (auto& receive : matcher_.take_receives_from(peer, peers_.all_lost())) receive.completion->fail(error);
  // Messages that fully arrived stay deliverable; half-arrived and announced ones never will be.
  for (auto& message : matcher_.take_incomplete_from(peer)) {
    if (message.claimed_by) message.claimed_by->completion->fail(error);
  }
  // A peer that left after its work was done (a Goodbye naming no error) revokes nothing: the
  // others may go on without it.
  if (!channel.left_in_order()) groups_.revoke_groups_of(peer, error);
}

void PeerLoss::abort(const std::string& reason, const Error* cause) {
  if (cause != nullptr) return stop_over(*cause);
  // Stopping (destroyed, say) after a revocation no new group followed: the peers hear its cause.
  if (!failures_.stopped() && groups_.unrecovered()) return stop_over(*groups_.unrecovered());
  shut_down(peers_.error<PeerClosedError>("aborted: " + reason, -1, "transport"), reason, 0);
}

// This rank and its peers fail with the cause itself (of its type, with its message, about the
// rank it names), not with "rank r aborted" around it.
void PeerLoss::stop_over(const Error& cause) {
  shut_down(detail::error_of_code(cause.code(), cause.message(),
                                  ErrorContext{.rank = peers_.rank(), .peer = cause.peer()}),
            cause.message(), 1 + static_cast<std::uint64_t>(cause.code()),
            cause.peer() >= 0 ? 1 + static_cast<std::uint64_t>(cause.peer()) : 0);
}

void PeerLoss::shut_down(std::exception_ptr error, const std::string& reason, std::uint64_t code,
                         std::uint64_t about) {
  failures_.say({reason, code, about});
  say_goodbye(reason, code, about);
  // What is queued before the Goodbye (a large message's data, say) gets a moment to leave, so
  // peers learn why rather than see an end of file; their input is dropped meanwhile, so a peer
  // blocked writing to us cannot block our writing to it.
  auto deadline = std::chrono::steady_clock::now() + kGoodbyeFlushTime;
  for (auto& channel : peers_) {
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
    for (auto& channel : peers_) {
      if (channel.connection() && !channel.connection()->stream().drained_to_end()) all = false;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  failures_.stop(error);
  poll_due_.store(true, std::memory_order_relaxed);  // poll() reports the stop
  // Every peer not lost yet: connected, or (on first use) not yet.
  for (int peer = 0; peer < peers_.size(); ++peer) {
    if (peer != peers_.rank() && !peers_.lost(peer)) lose_peer(peer, failures_.stopped());
  }
  // The connector stays: a peer that connects later (on first use) hears the Goodbye too. The
  // handshakes under way are finished now (within the flush time), so that a peer whose side of
  // one is complete does not find it cut when this transport is destroyed.
  while (engine_.connecting() && std::chrono::steady_clock::now() < deadline) {
    engine_.advance_connections();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& receive : matcher_.take_receives_from(peers_.rank(), true)) receive.completion->fail(failures_.stopped());
}

// Tells every live peer we are going, and why (`code`: 1 + the ErrorCode of the cause, 0: none
// in particular), so it sees an orderly shutdown rather than a crash.
void PeerLoss::say_goodbye(const std::string& reason, std::uint64_t code, std::uint64_t about) {
  for (auto& channel : peers_) {
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

void PeerLoss::say_farewell(PeerConnector::Connected& made) {
  StreamConnection late(made.peer, made.name, std::move(made.stream));
  const Failures::Farewell& farewell = failures_.farewell();
  late.queue(make_frame(FrameKind::Goodbye, 0, farewell.reason.size(), farewell.about, farewell.code),
             farewell.reason.data(), nullptr);
  // As shut_down: flushed, then the peer's input dropped until it closes (a close with
  // input arriving would reset the connection and lose the Goodbye), for a quarter second at most.
  auto deadline = std::chrono::steady_clock::now() + kGoodbyeFlushTime;
  try {
    while (late.has_output() && !late.flush() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    late.stream().close_gracefully();
    while (!late.stream().drained_to_end() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (const Error&) {
    // It is gone already; nothing to tell it.
  }
}

}  // namespace comm::transport
