// How a MeshTransport makes progress: its thread and epoll sets, and the hand-over between a
// waiter that spins (reading every peer itself, the thread asleep and deaf to the peers) and a
// waiter that sleeps (the thread re-arms the streams' wake-ups and completes what arrives).
// The message protocol itself (frames, matching, errors) is in mesh_transport.cpp.
#include "comm/error.hpp"
#include "transport/mesh_transport.hpp"

namespace comm::transport {

std::shared_ptr<MeshTransport> MeshTransport::create(int rank, std::vector<std::string> peer_names,
                                                     std::vector<std::unique_ptr<ByteStream>> streams) {
  auto transport = std::make_shared<MeshTransport>(rank, std::move(peer_names), std::move(streams));
  transport->progress_thread_ = std::thread([raw = transport.get()] { raw->run_progress_thread(); });
  return transport;
}

MeshTransport::MeshTransport(int rank, std::vector<std::string> peer_names,
                             std::vector<std::unique_ptr<ByteStream>> streams)
    : rank_(rank), size_(static_cast<int>(streams.size())), peer_names_(std::move(peer_names)), peers_(streams.size()) {
  epoll_.add(wake_.fd(), EPOLLIN, static_cast<std::uint64_t>(size_));
  idle_epoll_.add(wake_.fd(), EPOLLIN, static_cast<std::uint64_t>(size_));
  bool every_peer_shares_memory = size_ > 1;
  for (int peer = 0; peer < size_; ++peer) {
    if (!streams[peer]) continue;
    mediums_.insert(streams[peer]->medium());
    every_peer_shares_memory = every_peer_shares_memory && streams[peer]->shares_host_memory();
    peers_[peer].connection = std::make_unique<StreamConnection>(peer, peer_names_[peer], std::move(streams[peer]));
    epoll_.add(peers_[peer].connection->fd(), EPOLLIN, static_cast<std::uint64_t>(peer));
  }
  for (const auto& medium : mediums_) medium_ += (medium_.empty() ? "" : "+") + medium;
  if (medium_.empty()) medium_ = "self";
  capabilities_.same_host_shared_memory = every_peer_shares_memory;
}

MeshTransport::~MeshTransport() {
  stopping_ = true;
  wake_.signal();
  if (progress_thread_.joinable()) progress_thread_.join();
  abort("the process group was destroyed");
}

void MeshTransport::service(int peer) {
  if (peer == rank_) return;
  Peer& state = peers_[peer];
  if (!state.connection) return;
  try {
    servicing_peer_ = peer;
    state.connection->receive(*this);
    servicing_peer_ = -1;
    if (state.connection && state.connection->has_output() && state.connection->flush()) watch_output(peer, false);
  } catch (const Error&) {
    servicing_peer_ = -1;
    lose_peer(peer, std::current_exception());
  }
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
    service(peer);
    after += moved(peer);
  }
  awaited_ = nullptr;
  return after != before;
}

void MeshTransport::watch_output(int peer, bool on) {
  if (!peers_[peer].connection->stream().writes_wake_through_fd()) return;  // prepare_to_sleep arms it
  std::uint32_t interest = on ? EPOLLIN | EPOLLOUT : EPOLLIN;
  epoll_.modify(peers_[peer].connection->fd(), interest, static_cast<std::uint64_t>(peer));
}

// While a waiter spins, the progress thread does not re-arm the wake-ups peers would send it
// (one doorbell per message would cost more than the message); see run_progress_thread.
void MeshTransport::spinning(bool on) {
  if (!on) spin_episodes_.fetch_add(1);
  spinners_.fetch_add(on ? 1 : -1);
}

void MeshTransport::waiter_sleeps() {
  if (spinners_.load() > 0) return;
  waiter_asleep_.store(true);
  wake_.signal();  // the progress thread re-arms its wake-ups now
}

// Whether the progress thread may sleep deaf to the peers: a waiter spins, or one finished
// spinning since the thread last looked and none has gone to sleep since (a caller between two
// waits of a collective: it will be back spinning before the thread could help, and a thread
// woken for each arrival would take its core). Progress thread only; needs no lock.
bool MeshTransport::waiters_active() {
  std::uint32_t episodes = spin_episodes_.load();
  bool recent = episodes != seen_episodes_;
  seen_episodes_ = episodes;
  if (waiter_asleep_.exchange(false)) recent = false;
  return spinners_.load() > 0 || recent;
}

// Arms every stream's wake-up before sleeping; false when one already has work.
bool MeshTransport::prepare_to_sleep() {
  for (int peer = 0; peer < size_; ++peer) {
    auto& connection = peers_[peer].connection;
    if (connection && !connection->stream().prepare_to_sleep(connection->has_output())) return false;
  }
  return true;
}

void MeshTransport::woke_up() {
  for (auto& state : peers_) {
    if (state.connection) state.connection->stream().woke_up();
  }
}

void MeshTransport::run_progress_thread() {
  epoll_event events[64];
  while (!stopping_) {
    if (waiters_active()) {
      // Sleep deaf to the peers, unarmed and without the lock (a waiter that finds it taken
      // would sleep on it), for at most 1 ms, or until a waiter that gives up spinning pokes
      // wake_. Every armed sleep below was followed by woke_up(): nothing is left armed.
      if (idle_epoll_.wait(events, 64, 1) > 0) wake_.drain();
      continue;
    }
    bool may_sleep;
    {
      std::lock_guard lock(mutex_);
      may_sleep = prepare_to_sleep();
      if (!may_sleep) {
        woke_up();
        for (int peer = 0; peer < size_; ++peer) service(peer);
      }
    }
    if (!may_sleep) continue;
    int ready = epoll_.wait(events, 64, 1000);
    std::lock_guard lock(mutex_);
    woke_up();
    for (int i = 0; i < ready; ++i) {
      auto peer = static_cast<int>(events[i].data.u64);
      if (peer == size_) {
        wake_.drain();
        continue;
      }
      if (!peers_[peer].connection) continue;
      try {
        peers_[peer].connection->stream().on_wakeup();
      } catch (const Error&) {
        lose_peer(peer, std::current_exception());
        continue;
      }
      service(peer);
    }
  }
}

}  // namespace comm::transport
