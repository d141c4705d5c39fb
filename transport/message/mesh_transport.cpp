// MeshTransport: its making, the eager and rendezvous protocol on the sending side, and
// receives posted against what has arrived (matcher.hpp). What each arriving frame does is
// frame_receiver.cpp's; reading and waiting, progress_engine.cpp's.
#include "transport/message/mesh_transport.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "comm/error.hpp"
#include "libcomm/base/oversubscription.hpp"

namespace comm::transport {

std::shared_ptr<MeshTransport> MeshTransport::create(int rank, std::vector<std::string> peer_names,
                                                     std::vector<std::unique_ptr<ByteStream>> streams,
                                                     std::vector<int> hosts, std::unique_ptr<PeerConnector> connector,
                                                     ArenaMaker arena_maker) {
  auto transport =
      std::make_shared<MeshTransport>(rank, std::move(peer_names), std::move(streams), std::move(connector));
  if (rank >= 0 && static_cast<std::size_t>(rank) < hosts.size())
    detail::note_ranks_on_host(static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)])));
  transport->hosts_ = std::move(hosts);
  transport->arena_maker_ = std::move(arena_maker);
  transport->engine_.start();
  return transport;
}

MeshTransport::MeshTransport(int rank, std::vector<std::string> peer_names,
                             std::vector<std::unique_ptr<ByteStream>> streams, std::unique_ptr<PeerConnector> connector)
    : peers_(rank, std::move(peer_names)),
      engine_(mutex_, peers_, frames_, loss_, mismatches_, std::move(connector)) {
  int size = static_cast<int>(streams.size());
  std::set<std::string> media;
  bool every_peer_shares_memory = size > 1;
  for (int peer = 0; peer < size; ++peer) {
    if (!streams[peer]) {
      if (peer != rank && engine_.connects_on_first_use()) {  // a TCP connection, made on first use
        media.insert("tcp");
        every_peer_shares_memory = false;
      }
      continue;
    }
    media.insert(streams[peer]->medium());
    every_peer_shares_memory = every_peer_shares_memory && streams[peer]->shares_host_memory();
    engine_.attach(peer, std::move(streams[peer]));
  }
  for (const auto& medium : media) medium_ += (medium_.empty() ? "" : "+") + medium;
  if (medium_.empty()) medium_ = "self";
  capabilities_.same_host_shared_memory = every_peer_shares_memory;
}

MeshTransport::~MeshTransport() {
  engine_.stop();
  abort("the process group was destroyed");
}

bool MeshTransport::progress(int peer_hint, const detail::Completion* awaited) {
  return engine_.progress(peer_hint, awaited);
}

std::exception_ptr MeshTransport::poll() {
  if (!poll_due()) return nullptr;
  std::lock_guard lock(mutex_);
  engine_.service_all();
  // Due again only once a message-based call is noted; a stopped transport stays due.
  poll_due_.store(loss_.stopped() != nullptr, std::memory_order_relaxed);
  return loss_.stopped();
}

std::exception_ptr MeshTransport::failure(int peer) {
  std::lock_guard lock(mutex_);
  return loss_.failure(peer);
}

std::exception_ptr MeshTransport::conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  return mismatches_.conflict(peer, tag, fingerprint);
}

void MeshTransport::abort(const std::string& reason, const Error* cause) {
  std::lock_guard lock(mutex_);
  loss_.abort(reason, cause);
}

std::shared_ptr<detail::Completion> MeshTransport::new_completion(int peer) {
  // The progressor is a weak pointer: a Work kept after its group died must not keep the
  // transport (and its thread) alive.
  return std::make_shared<detail::Completion>(std::weak_ptr<detail::Progressor>(weak_from_this()), peer);
}

std::shared_ptr<detail::Completion> MeshTransport::isend(int peer, const void* data, std::size_t bytes,
                                                         std::uint64_t tag, std::uint64_t fingerprint) {
  auto completion = new_completion(peer);
  std::lock_guard lock(mutex_);
  mismatches_.note_call(tag, fingerprint);
  if (loss_.stopped()) {
    completion->fail(loss_.stopped());
  } else if (groups_.revocations().any() && groups_.revocations().fail_if_revoked(tag, *completion)) [[unlikely]] {
  } else if (peer == peers_.rank()) {
    deliver_to_self(data, bytes, tag, fingerprint);
    completion->complete(bytes, peers_.rank());
  } else if (peers_[peer].error()) {
    completion->fail(peers_[peer].error());
  } else if (bytes <= kEagerBytes) {
    engine_.send_frame(peer, make_frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data, completion);
  } else {
    std::uint64_t id = next_id_++;
    Channel& channel = peers_[peer];
    FrameHeader announcement = make_frame(FrameKind::ReadyToSend, tag, bytes, id, fingerprint);
    // Lent where the stream can (one copy, read by the receiver); else cleared and written.
    LentBuffers* lent = lent_buffers_of(channel);
    Lease lease = lent != nullptr ? lent->offer(data, bytes) : Lease();
    announcement.lease = lease.id();
    channel.await_clearance(id, {data, bytes, tag, completion, std::move(lease)});
    engine_.send_frame(peer, announcement, nullptr, nullptr);
  }
  return completion;
}

// The common case of a small send, without a Completion: written straight into the stream
// when nothing is queued before it (what the stream does not take is copied and queued).
bool MeshTransport::send_now(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                             std::uint64_t fingerprint) {
  if (bytes > kEagerBytes || peer == peers_.rank()) return false;
  std::lock_guard lock(mutex_);
  mismatches_.note_call(tag, fingerprint);
  StreamConnection* connection = peers_[peer].connection();
  if (loss_.stopped() || peers_[peer].error() || !connection || groups_.revocations().of_tag(tag) != nullptr)
    return false;
  try {
    if (!connection->write_now(make_frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data)) return false;
  } catch (const Error&) {
    loss_.lose_after_write_error(peer, std::current_exception());
    return false;  // isend reports the loss
  }
  if (connection->has_output()) engine_.watch_output(peer, true);
  return true;
}

std::shared_ptr<detail::Completion> MeshTransport::irecv(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                                         std::uint64_t fingerprint) {
  auto completion = new_completion(peer);
  irecv_into(completion, peer, data, capacity, tag, fingerprint);
  return completion;
}

bool MeshTransport::cancel(const detail::Completion* completion) {
  std::lock_guard lock(mutex_);
  return completion->done() || matcher_.withdraw(completion);
}

std::shared_ptr<detail::Completion> MeshTransport::irecv_reduce(int peer, void* data, std::size_t capacity,
                                                                std::uint64_t tag, const Combiner& reduction,
                                                                std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  // Only where the bytes can be combined straight from the medium; else the caller's scratch
  // copy and reduce cost no more.
  if (peer < 0 || peer == peers_.rank() || !peers_[peer].connection() ||
      !peers_[peer].connection()->stream().reads_in_place()) {
    return nullptr;
  }
  auto completion = new_completion(peer);
  post_receive({peer, tag, data, capacity, completion, fingerprint, reduction});
  return completion;
}

void MeshTransport::irecv_into(std::shared_ptr<detail::Completion> completion, int peer, void* data,
                               std::size_t capacity, std::uint64_t tag, std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  post_receive({peer, tag, data, capacity, std::move(completion), fingerprint, {}});
}

void MeshTransport::post_receive(PostedReceive&& receive) {
  mismatches_.note_call(receive.tag, receive.fingerprint);
  if (loss_.stopped()) {
    receive.completion->fail(loss_.stopped());
    return;
  }
  const Revocations& revocations = groups_.revocations();
  if (revocations.any() && revocations.fail_if_revoked(receive.tag, *receive.completion)) [[unlikely]]
    return;
  int peer = receive.source;
  std::uint64_t tag = receive.tag, fingerprint = receive.fingerprint;
  UnexpectedMessage* message = matcher_.find_unexpected(receive);
  if (message != nullptr && conflicting(message->fingerprint, fingerprint)) {
    mismatches_.fail(receive, message->source, message->fingerprint);  // the message stays unclaimed
    return;
  }
  if (message == nullptr) {
    if (auto other = mismatches_.disagreement(receive)) {
      mismatches_.fail(receive, other->source, other->fingerprint);
      return;
    }
    // Messages that arrived before a peer left are still delivered (above); nothing more will.
    if (peer != kAnySource && peer != peers_.rank() && peers_[peer].error()) {
      receive.completion->fail(peers_[peer].error());
      return;
    }
    // A peer waited for is connected now, so that its end (or its Goodbye) is seen here.
    if (peer != kAnySource && peer != peers_.rank() && !peers_[peer].connection()) [[unlikely]]
      engine_.connect_on_first_use(peer);
    if (peer == kAnySource && peers_.all_lost()) {
      receive.completion->fail(peers_.error<PeerClosedError>(
          "every peer is gone; nobody is left to send to a receive from any source", -1, "recv"));
      return;
    }
    matcher_.post(std::move(receive));
    return;
  }
  if (!frames_.fits(receive, message->source, tag, message->bytes, message->rendezvous ? message->id : 0)) {
    // One still arriving stays until its payload is in: the stream is writing into it.
    if (message->rendezvous || message->arrived) {
      matcher_.remove_unexpected(message);
    } else {
      message->dropped = true;
    }
  } else if (message->rendezvous) {
    int source = message->source;
    std::uint64_t id = message->id, bytes = message->bytes;
    std::uint32_t lease = message->lease;
    matcher_.remove_unexpected(message);
    frames_.clear_to_send(source, id, lease, bytes, std::move(receive));
  } else if (message->arrived) {
    deliver(receive, message->payload.data(), message->bytes);
    receive.completion->complete(message->bytes, message->source);
    matcher_.remove_unexpected(message);
  } else {
    message->claimed_by = std::move(receive);  // completed when its payload has arrived
  }
}

void MeshTransport::deliver_to_self(const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint) {
  if (std::optional<PostedReceive> receive; matcher_.take_receive(peers_.rank(), tag, receive)) {
    if (conflicting(receive->fingerprint, fingerprint)) {
      mismatches_.fail(*receive, peers_.rank(), fingerprint);
    } else if (frames_.fits(*receive, peers_.rank(), tag, bytes, 0)) {
      deliver(*receive, data, bytes);
      receive->completion->complete(bytes, peers_.rank());
    }
    return;
  }
  UnexpectedMessage message{peers_.rank(), tag, bytes, false, 0, true, {}, std::nullopt, fingerprint};
  auto* begin = static_cast<const std::uint8_t*>(data);
  message.payload.assign(begin, begin + bytes);
  matcher_.add_unexpected(std::move(message));
  mismatches_.fail_conflicting(peers_.rank(), tag, fingerprint);
}

std::unique_ptr<SharedArena> MeshTransport::map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                             std::chrono::milliseconds timeout,
                                                             std::size_t slot_bytes) {
  if (!capabilities_.same_host_shared_memory || !arena_maker_) return nullptr;
  return arena_maker_(store, key, rank, size, timeout, slot_bytes);
}

}  // namespace comm::transport
