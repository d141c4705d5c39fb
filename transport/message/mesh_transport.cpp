// MeshTransport's sending and receiving: the eager and rendezvous protocol on the sending side,
// and receives posted against what has arrived (matcher.hpp). What each arriving frame does is
// in mesh_frames.cpp; mismatch checks in mesh_mismatch.cpp; a lost peer in mesh_peer_loss.cpp;
// the progress thread and waiting in mesh_progress.cpp.
#include "transport/message/mesh_transport.hpp"

#include <cstring>

#include "comm/error.hpp"

namespace comm::transport {

std::shared_ptr<detail::Completion> MeshTransport::new_completion(int peer) {
  // The progressor is a weak pointer: a Work kept after its group died must not keep the
  // transport (and its thread) alive.
  return std::make_shared<detail::Completion>(std::weak_ptr<detail::Progressor>(weak_from_this()), peer);
}

std::shared_ptr<detail::Completion> MeshTransport::isend(int peer, const void* data, std::size_t bytes,
                                                         std::uint64_t tag, std::uint64_t fingerprint) {
  auto completion = new_completion(peer);
  std::lock_guard lock(mutex_);
  note_call(tag, fingerprint);
  if (failures_.stopped()) {
    completion->fail(failures_.stopped());
  } else if (revocations_.any() && revocations_.fail_if_revoked(tag, *completion)) [[unlikely]] {
  } else if (peer == rank_) {
    deliver_to_self(data, bytes, tag, fingerprint);
    completion->complete(bytes, rank_);
  } else if (channels_[peer].error()) {
    completion->fail(channels_[peer].error());
  } else if (bytes <= kEagerBytes) {
    send_frame(peer, make_frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data, completion);
  } else {
    std::uint64_t id = next_id_++;
    channels_[peer].await_clearance(id, {data, bytes, tag, completion});
    send_frame(peer, make_frame(FrameKind::ReadyToSend, tag, bytes, id, fingerprint), nullptr, nullptr);
  }
  return completion;
}

// The common case of a small send, without a Completion: written straight into the stream
// when nothing is queued before it (what the stream does not take is copied and queued).
bool MeshTransport::send_now(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                             std::uint64_t fingerprint) {
  if (bytes > kEagerBytes || peer == rank_) return false;
  std::lock_guard lock(mutex_);
  note_call(tag, fingerprint);
  StreamConnection* connection = channels_[peer].connection();
  if (failures_.stopped() || channels_[peer].error() || !connection || revocations_.of_tag(tag) != nullptr)
    return false;
  try {
    if (!connection->write_now(make_frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data)) return false;
  } catch (const Error&) {
    lose_after_write_error(peer, std::current_exception());
    return false;  // isend reports the loss
  }
  if (connection->has_output()) driver_.watch_output(peer, true);
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
  if (peer < 0 || peer == rank_ || !channels_[peer].connection() ||
      !channels_[peer].connection()->stream().reads_in_place()) {
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
  note_call(receive.tag, receive.fingerprint);
  if (failures_.stopped()) {
    receive.completion->fail(failures_.stopped());
    return;
  }
  if (revocations_.any() && revocations_.fail_if_revoked(receive.tag, *receive.completion)) [[unlikely]]
    return;
  int peer = receive.source;
  std::uint64_t tag = receive.tag, fingerprint = receive.fingerprint;
  UnexpectedMessage* message = matcher_.find_unexpected(receive);
  if (message != nullptr && conflicting(message->fingerprint, fingerprint)) {
    fail_mismatch(receive, message->source, message->fingerprint);  // the message stays unclaimed
    return;
  }
  if (message == nullptr) {
    // A send/recv (fingerprint 0) has no call to disagree with: not even asked.
    if (receive.fingerprint != 0) {
      if (auto other = disagreement(receive)) {
        fail_mismatch(receive, other->source, other->fingerprint);
        return;
      }
    }
    // Messages that arrived before a peer left are still delivered (above); nothing more will.
    if (peer != kAnySource && peer != rank_ && channels_[peer].error()) {
      receive.completion->fail(channels_[peer].error());
      return;
    }
    // A peer waited for is connected now, so that its end (or its Goodbye) is seen here.
    if (peer != kAnySource && peer != rank_ && !channels_[peer].connection()) [[unlikely]]
      connect_on_first_use(peer);
    if (peer == kAnySource && all_peers_lost()) {
      receive.completion->fail(make_error<PeerClosedError>(
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
    std::uint64_t id = message->id;
    matcher_.remove_unexpected(message);
    frames_.clear_to_send(source, id, std::move(receive));
  } else if (message->arrived) {
    deliver(receive, message->payload.data(), message->bytes);
    receive.completion->complete(message->bytes, message->source);
    matcher_.remove_unexpected(message);
  } else {
    message->claimed_by = std::move(receive);  // completed when its payload has arrived
  }
}

void MeshTransport::deliver_to_self(const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint) {
  if (std::optional<PostedReceive> receive; matcher_.take_receive(rank_, tag, receive)) {
    if (conflicting(receive->fingerprint, fingerprint)) {
      fail_mismatch(*receive, rank_, fingerprint);
    } else if (frames_.fits(*receive, rank_, tag, bytes, 0)) {
      deliver(*receive, data, bytes);
      receive->completion->complete(bytes, rank_);
    }
    return;
  }
  UnexpectedMessage message{rank_, tag, bytes, false, 0, true, {}, std::nullopt, fingerprint};
  auto* begin = static_cast<const std::uint8_t*>(data);
  message.payload.assign(begin, begin + bytes);
  matcher_.add_unexpected(std::move(message));
  fail_conflicting(rank_, tag, fingerprint);
}

void MeshTransport::send_frame(int peer, const FrameHeader& header, const void* payload,
                               std::shared_ptr<detail::Completion> on_written) {
  try {
    switch (channels_[peer].send(header, payload, std::move(on_written), connector_ != nullptr)) {
      case Channel::Sent::Queued: driver_.watch_output(peer, true); break;
      case Channel::Sent::Waiting: connect_on_first_use(peer); break;
      case Channel::Sent::Written:
      case Channel::Sent::Failed: break;
    }
  } catch (const Error&) {
    // Inside that connection's receive() (answering a frame), the connection must outlive
    // the call: Driver::service loses the peer once receive() has unwound.
    if (peer == servicing_peer_) throw;
    lose_after_write_error(peer, std::current_exception());
  }
}

std::unique_ptr<SharedArena> MeshTransport::map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                             std::chrono::milliseconds timeout,
                                                             std::size_t slot_bytes) {
  if (!capabilities_.same_host_shared_memory || !arena_maker_) return nullptr;
  return arena_maker_(store, key, rank, size, timeout, slot_bytes);
}

}  // namespace comm::transport
