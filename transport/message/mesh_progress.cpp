// How a MeshTransport makes progress: a waiter reads its peers itself (progress()), and the
// transport's ProgressThread (progress_thread.hpp) reads them while nobody waits, through the
// Driver calls below. The message protocol itself (frames, matching, errors) is in
// mesh_transport.cpp and mesh_frames.cpp.
#include <chrono>
#include <thread>
#include <utility>

#include "comm/error.hpp"
#include "transport/message/mesh_transport.hpp"

namespace comm::transport {

std::shared_ptr<MeshTransport> MeshTransport::create(int rank, std::vector<std::string> peer_names,
                                                     std::vector<std::unique_ptr<ByteStream>> streams,
                                                     std::vector<int> hosts, std::unique_ptr<PeerConnector> connector,
                                                     ArenaMaker arena_maker) {
  auto transport =
      std::make_shared<MeshTransport>(rank, std::move(peer_names), std::move(streams), std::move(connector));
  transport->hosts_ = std::move(hosts);
  transport->arena_maker_ = std::move(arena_maker);
  transport->progress_.start(transport->driver_);
  return transport;
}

MeshTransport::MeshTransport(int rank, std::vector<std::string> peer_names,
                             std::vector<std::unique_ptr<ByteStream>> streams, std::unique_ptr<PeerConnector> connector)
    : rank_(rank),
      size_(static_cast<int>(streams.size())),
      peer_names_(std::move(peer_names)),
      channels_(streams.size()),
      connector_(std::move(connector)) {
  bool every_peer_shares_memory = size_ > 1;
  for (int peer = 0; peer < size_; ++peer) {
    if (!streams[peer]) {
      if (peer != rank_ && connector_) {  // a TCP connection, made on first use
        mediums_.insert("tcp");
        every_peer_shares_memory = false;
      }
      continue;
    }
    mediums_.insert(streams[peer]->medium());
    every_peer_shares_memory = every_peer_shares_memory && streams[peer]->shares_host_memory();
    channels_[peer].attach(std::make_unique<StreamConnection>(peer, peer_names_[peer], std::move(streams[peer])));
    progress_.watch(channels_[peer].connection()->fd(), static_cast<std::uint64_t>(peer));
  }
  for (const auto& medium : mediums_) medium_ += (medium_.empty() ? "" : "+") + medium;
  if (medium_.empty()) medium_ = "self";
  capabilities_.same_host_shared_memory = every_peer_shares_memory;
  if (connector_) progress_.watch(connector_->fd(), Driver::kConnectorKey);
}

MeshTransport::~MeshTransport() {
  progress_.stop();
  abort("the process group was destroyed");
}

bool MeshTransport::progress(int peer_hint, const detail::Completion* awaited) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // someone else is making progress right now
  awaited_ = awaited;
  // A handshake under way is moved on by whoever makes progress: a spinning waiter keeps the
  // progress thread away from the connector's descriptors.
  if (connector_ && connector_->busy()) [[unlikely]]
    advance_connections();
  auto moved = [&](int peer) -> std::uint64_t {
    return channels_[peer].connection() ? channels_[peer].connection()->bytes_moved() : 0;
  };
  std::uint64_t before = 0, after = 0;
  int first = peer_hint >= 0 && peer_hint != rank_ ? peer_hint : 0;
  int last = peer_hint >= 0 && peer_hint != rank_ ? peer_hint : size_ - 1;
  for (int peer = first; peer <= last; ++peer) {
    before += moved(peer);
    driver_.service(peer);
    after += moved(peer);
  }
  awaited_ = nullptr;
  return after != before;
}

std::exception_ptr MeshTransport::poll() {
  if (!poll_due()) return nullptr;
  std::lock_guard lock(mutex_);
  driver_.service_all();
  // Due again only once a message-based call is noted; a stopped transport stays due.
  poll_due_.store(failures_.stopped() != nullptr, std::memory_order_relaxed);
  return failures_.stopped();
}

void MeshTransport::connect_on_first_use(int peer) {
  if (connector_ && !channels_[peer].connection() && !channels_[peer].error() && peer != rank_) connector_->want(peer);
}

void MeshTransport::advance_connections() {
  std::vector<PeerConnector::Connected> connected;
  std::vector<PeerConnector::Lost> lost;
  connector_->advance(connected, lost);
  for (auto& made : connected) {
    Channel& channel = channels_[made.peer];
    if (channel.connection()) continue;
    if (channel.error()) {
      if (failures_.stopped()) say_farewell(made);
      continue;
    }
    peer_names_[made.peer] = made.name;
    channel.attach(std::make_unique<StreamConnection>(made.peer, made.name, std::move(made.stream)));
    progress_.watch(channel.connection()->fd(), static_cast<std::uint64_t>(made.peer));
    try {
      if (channel.flush()) driver_.watch_output(made.peer, true);
    } catch (const Error&) {
      lose_after_write_error(made.peer, std::current_exception());
    }
  }
  for (auto& failed : lost) {
    if (!channels_[failed.peer].error()) {
      lose_peer(failed.peer, make_error<PeerClosedError>(failed.reason, failed.peer, "connect"));
    }
  }
}

void MeshTransport::say_farewell(PeerConnector::Connected& made) {
  StreamConnection late(made.peer, made.name, std::move(made.stream));
  const Failures::Farewell& farewell = failures_.farewell();
  late.queue(make_frame(FrameKind::Goodbye, 0, farewell.reason.size(), farewell.about, farewell.code),
             farewell.reason.data(), nullptr);
  // As shut_down: flushed, then the peer's input dropped until it closes (a close with
  // input arriving would reset the connection and lose the Goodbye), for a quarter second at most.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
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

void MeshTransport::spinning(bool on) { progress_.spinning(on); }

void MeshTransport::waiter_sleeps() { progress_.waiter_sleeps(); }

void MeshTransport::Driver::service(int peer) {
  if (peer == mesh_.rank_) return;
  Channel& channel = mesh_.channels_[peer];
  if (!channel.connection()) return;
  try {
    mesh_.servicing_peer_ = peer;
    channel.connection()->receive(mesh_.frames_);
    mesh_.servicing_peer_ = -1;
    // What the frames just read queued (a cleared large send's payload, answers) leaves here,
    // in this channel's own step.
    if (channel.connection() && channel.connection()->has_output()) watch_output(peer, channel.flush());
  } catch (const Error&) {
    mesh_.servicing_peer_ = -1;
    // After a mismatch in this read the peer's end (it stopped over the same mismatch) is no
    // news: the mismatch is what everything fails with.
    if (!mesh_.pending_mismatch_) mesh_.lose_peer(peer, std::current_exception());
  }
  if (mesh_.pending_mismatch_) mesh_.shut_down_on(std::exchange(mesh_.pending_mismatch_, nullptr));
  for (auto& [lost, error] : std::exchange(mesh_.write_losses_, {})) mesh_.lose_after_write_error(lost, error);
}

void MeshTransport::Driver::watch_output(int peer, bool on) {
  Channel& channel = mesh_.channels_[peer];
  StreamConnection* connection = channel.connection();
  if (!connection->stream().writes_wake_through_fd()) return;  // prepare_to_sleep arms it
  if (channel.watch_output(on)) mesh_.progress_.watch_output(connection->fd(), static_cast<std::uint64_t>(peer), on);
}

// Arms every stream's wake-up before sleeping; false when one already has work.
bool MeshTransport::Driver::prepare_to_sleep() {
  for (int peer = 0; peer < mesh_.size_; ++peer) {
    StreamConnection* connection = mesh_.channels_[peer].connection();
    if (connection && !connection->stream().prepare_to_sleep(connection->has_output())) return false;
  }
  return true;
}

void MeshTransport::Driver::woke_up() {
  for (auto& channel : mesh_.channels_) {
    if (channel.connection()) channel.connection()->stream().woke_up();
  }
}

void MeshTransport::Driver::service_all() {
  if (mesh_.connector_ && mesh_.connector_->busy()) mesh_.advance_connections();
  for (int peer = 0; peer < mesh_.size_; ++peer) service(peer);
}

void MeshTransport::Driver::ready(std::uint64_t key) {
  if (key == kConnectorKey) return mesh_.advance_connections();
  auto peer = static_cast<int>(key);
  if (!mesh_.channels_[peer].connection()) return;
  try {
    mesh_.channels_[peer].connection()->stream().on_wakeup();
  } catch (const Error&) {
    mesh_.lose_peer(peer, std::current_exception());
    return;
  }
  service(peer);
}

void MeshTransport::Driver::thread_failed(const std::string& reason) { mesh_.abort(reason); }

}  // namespace comm::transport
