// Which peer is read when, and by whom: a waiter's own step, the progress thread's wake-ups,
// connections made on first use, and frames written or queued for room.
#include "transport/message/progress_engine.hpp"

#include <utility>

#include "comm/error.hpp"
#include "transport/message/mismatch_watch.hpp"
#include "transport/message/peer_loss.hpp"

namespace comm::transport {

ProgressEngine::ProgressEngine(detail::AtomicMutex& mutex, Peers& peers, StreamConnection::Sink& frames,
                               PeerLoss& loss, MismatchWatch& mismatches, std::unique_ptr<PeerConnector> connector)
    : mutex_(mutex),
      peers_(peers),
      frames_(frames),
      loss_(loss),
      mismatches_(mismatches),
      connector_(std::move(connector)) {
  if (connector_) thread_.watch(connector_->fd(), kConnectorKey);
}

void ProgressEngine::attach(int peer, std::unique_ptr<ByteStream> stream) {
  Channel& channel = peers_[peer];
  channel.attach(std::make_unique<StreamConnection>(peer, peers_.name(peer), std::move(stream)));
  thread_.watch(channel.connection()->fd(), static_cast<std::uint64_t>(peer));
}

bool ProgressEngine::progress(int peer_hint, const detail::Completion* awaited) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // someone else is making progress right now
  // A handshake under way is moved on by whoever makes progress: a spinning waiter keeps the
  // progress thread away from the connector's descriptors.
  if (connecting()) [[unlikely]]
    advance_connections();
  awaited_ = awaited;
  int rank = peers_.rank();
  bool one = peer_hint >= 0 && peer_hint != rank;  // a waiter's peer: the poll of every spin
  int first = one ? peer_hint : 0, last = one ? peer_hint : peers_.size() - 1;
  bool moved = false;
  for (int peer = first; peer <= last; ++peer) {
    StreamConnection* connection = peers_[peer].connection();
    if (connection == nullptr) continue;
    std::uint64_t before = connection->bytes_moved();
    service(peer);
    // (service may have lost the peer: its connection is gone, and that is news too.)
    connection = peers_[peer].connection();
    moved = moved || connection == nullptr || connection->bytes_moved() != before;
  }
  awaited_ = nullptr;
  return moved;
}

void ProgressEngine::service(int peer) {
  if (peer == peers_.rank()) return;
  Channel& channel = peers_[peer];
  if (!channel.connection()) return;
  try {
    servicing_peer_ = peer;
    channel.connection()->receive(frames_);
    servicing_peer_ = -1;
    // What the frames just read queued (a cleared large send's payload, answers) leaves here,
    // in this channel's own step.
    if (channel.connection() && channel.connection()->has_output()) watch_output(peer, channel.flush());
  } catch (const Error&) {
    servicing_peer_ = -1;
    // After a mismatch in this read the peer's end (it stopped over the same mismatch) is no
    // news: the mismatch is what everything fails with.
    if (!mismatches_.pending()) loss_.lose_peer(peer, std::current_exception());
  }
  mismatches_.handle_pending();
  loss_.lose_after_writes();
}

void ProgressEngine::send_frame(int peer, const FrameHeader& header, const void* payload,
                                std::shared_ptr<detail::Completion> on_written) {
  try {
    switch (peers_[peer].send(header, payload, std::move(on_written), connector_ != nullptr)) {
      case Channel::Sent::Queued: watch_output(peer, true); break;
      case Channel::Sent::Waiting: connect_on_first_use(peer); break;
      case Channel::Sent::Written:
      case Channel::Sent::Failed: break;
    }
  } catch (const Error&) {
    // Inside that connection's receive() (answering a frame), the connection must outlive
    // the call: service() loses the peer once receive() has unwound.
    if (servicing(peer)) throw;
    loss_.lose_after_write_error(peer, std::current_exception());
  }
}

void ProgressEngine::watch_output(int peer, bool on) {
  Channel& channel = peers_[peer];
  StreamConnection* connection = channel.connection();
  if (!connection->stream().writes_wake_through_fd()) return;  // prepare_to_sleep arms it
  if (channel.watch_output(on)) thread_.watch_output(connection->fd(), static_cast<std::uint64_t>(peer), on);
}

void ProgressEngine::connect_on_first_use(int peer) {
  if (connector_ && !peers_[peer].connection() && !peers_[peer].error() && peer != peers_.rank()) {
    connector_->want(peer);
  }
}

void ProgressEngine::advance_connections() {
  std::vector<PeerConnector::Connected> connected;
  std::vector<PeerConnector::Lost> lost;
  connector_->advance(connected, lost);
  for (auto& made : connected) {
    Channel& channel = peers_[made.peer];
    if (channel.connection()) continue;
    if (channel.error()) {
      if (loss_.stopped()) loss_.say_farewell(made);
      continue;
    }
    peers_.rename(made.peer, made.name);
    attach(made.peer, std::move(made.stream));
    try {
      if (channel.flush()) watch_output(made.peer, true);
    } catch (const Error&) {
      loss_.lose_after_write_error(made.peer, std::current_exception());
    }
  }
  for (auto& failed : lost) {
    if (!peers_[failed.peer].error()) {
      loss_.lose_peer(failed.peer, peers_.error<PeerClosedError>(failed.reason, failed.peer, "connect"));
    }
  }
}

// Arms every stream's wake-up before sleeping; false when one already has work.
bool ProgressEngine::prepare_to_sleep() {
  for (auto& channel : peers_) {
    StreamConnection* connection = channel.connection();
    if (connection && !connection->stream().prepare_to_sleep(connection->has_output())) return false;
  }
  return true;
}

void ProgressEngine::woke_up() {
  for (auto& channel : peers_) {
    if (channel.connection()) channel.connection()->stream().woke_up();
  }
}

void ProgressEngine::service_all() {
  if (connecting()) advance_connections();
  for (int peer = 0; peer < peers_.size(); ++peer) service(peer);
}

void ProgressEngine::ready(std::uint64_t key) {
  if (key == kConnectorKey) return advance_connections();
  auto peer = static_cast<int>(key);
  if (!peers_[peer].connection()) return;
  try {
    peers_[peer].connection()->stream().on_wakeup();
  } catch (const Error&) {
    loss_.lose_peer(peer, std::current_exception());
    return;
  }
  service(peer);
}

void ProgressEngine::thread_failed(const std::string& reason) {
  std::lock_guard lock(mutex_);
  loss_.abort(reason, nullptr);
}

}  // namespace comm::transport
