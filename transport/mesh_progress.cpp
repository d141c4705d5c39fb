// How a MeshTransport makes progress: a waiter reads its peers itself (progress()), and the
// transport's ProgressThread (progress_thread.hpp) reads them while nobody waits, through the
// Driver calls below. The message protocol itself (frames, matching, errors) is in
// mesh_transport.cpp and mesh_frames.cpp.
#include <utility>

#include "comm/error.hpp"
#include "transport/mesh_transport.hpp"

namespace comm::transport {

std::shared_ptr<MeshTransport> MeshTransport::create(int rank, std::vector<std::string> peer_names,
                                                     std::vector<std::unique_ptr<ByteStream>> streams,
                                                     std::vector<int> hosts) {
  auto transport = std::make_shared<MeshTransport>(rank, std::move(peer_names), std::move(streams));
  transport->hosts_ = std::move(hosts);
  transport->progress_.start(transport->driver_);
  return transport;
}

MeshTransport::MeshTransport(int rank, std::vector<std::string> peer_names,
                             std::vector<std::unique_ptr<ByteStream>> streams)
    : rank_(rank), size_(static_cast<int>(streams.size())), peer_names_(std::move(peer_names)), peers_(streams.size()) {
  bool every_peer_shares_memory = size_ > 1;
  for (int peer = 0; peer < size_; ++peer) {
    if (!streams[peer]) continue;
    mediums_.insert(streams[peer]->medium());
    every_peer_shares_memory = every_peer_shares_memory && streams[peer]->shares_host_memory();
    peers_[peer].connection = std::make_unique<StreamConnection>(peer, peer_names_[peer], std::move(streams[peer]));
    progress_.watch(peers_[peer].connection->fd(), static_cast<std::uint64_t>(peer));
  }
  for (const auto& medium : mediums_) medium_ += (medium_.empty() ? "" : "+") + medium;
  if (medium_.empty()) medium_ = "self";
  capabilities_.same_host_shared_memory = every_peer_shares_memory;
}

MeshTransport::~MeshTransport() {
  progress_.stop();
  abort("the process group was destroyed");
}

bool MeshTransport::progress(int peer_hint, const detail::Completion* awaited) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // someone else is making progress right now
  awaited_ = awaited;
  auto moved = [&](int peer) -> std::uint64_t {
    return peers_[peer].connection ? peers_[peer].connection->bytes_moved() : 0;
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
  poll_due_.store(aborted_ != nullptr, std::memory_order_relaxed);
  return aborted_;
}

void MeshTransport::spinning(bool on) { progress_.spinning(on); }

void MeshTransport::waiter_sleeps() { progress_.waiter_sleeps(); }

void MeshTransport::Driver::service(int peer) {
  if (peer == mesh_.rank_) return;
  Peer& state = mesh_.peers_[peer];
  if (!state.connection) return;
  try {
    mesh_.servicing_peer_ = peer;
    state.connection->receive(mesh_.frames_);
    mesh_.servicing_peer_ = -1;
    if (state.connection && state.connection->has_output() && state.connection->flush()) watch_output(peer, false);
  } catch (const Error&) {
    mesh_.servicing_peer_ = -1;
    // After a mismatch in this read the peer's end (it stopped over the same mismatch) is no
    // news: the mismatch is what everything fails with.
    if (!mesh_.pending_mismatch_) mesh_.peer_loss_.lose_peer(peer, std::current_exception());
  }
  if (mesh_.pending_mismatch_) mesh_.mismatches_.shut_down_on(std::exchange(mesh_.pending_mismatch_, nullptr));
  for (auto& [lost, error] : std::exchange(mesh_.write_losses_, {}))
    mesh_.peer_loss_.lose_after_write_error(lost, error);
}

void MeshTransport::Driver::watch_output(int peer, bool on) {
  if (!mesh_.peers_[peer].connection->stream().writes_wake_through_fd()) return;  // prepare_to_sleep arms it
  mesh_.progress_.watch_output(mesh_.peers_[peer].connection->fd(), static_cast<std::uint64_t>(peer), on);
}

// Arms every stream's wake-up before sleeping; false when one already has work.
bool MeshTransport::Driver::prepare_to_sleep() {
  for (int peer = 0; peer < mesh_.size_; ++peer) {
    auto& connection = mesh_.peers_[peer].connection;
    if (connection && !connection->stream().prepare_to_sleep(connection->has_output())) return false;
  }
  return true;
}

void MeshTransport::Driver::woke_up() {
  for (auto& state : mesh_.peers_) {
    if (state.connection) state.connection->stream().woke_up();
  }
}

void MeshTransport::Driver::service_all() {
  for (int peer = 0; peer < mesh_.size_; ++peer) service(peer);
}

void MeshTransport::Driver::ready(std::uint64_t key) {
  auto peer = static_cast<int>(key);
  if (!mesh_.peers_[peer].connection) return;
  try {
    mesh_.peers_[peer].connection->stream().on_wakeup();
  } catch (const Error&) {
    mesh_.peer_loss_.lose_peer(peer, std::current_exception());
    return;
  }
  service(peer);
}

void MeshTransport::Driver::thread_failed(const std::string& reason) { mesh_.abort(reason); }

}  // namespace comm::transport
