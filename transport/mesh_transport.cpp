#include "transport/mesh_transport.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"
#include "transport/shm/shared_arena.hpp"

namespace comm::transport {
namespace {

FrameHeader frame(FrameKind kind, std::uint64_t tag, std::uint64_t bytes, std::uint64_t id = 0, std::uint64_t extra = 0) {
  FrameHeader header{};
  header.kind = kind;
  header.tag = tag;
  header.bytes = bytes;
  header.id = id;
  header.extra = extra;
  return header;
}

template <class Error>
std::exception_ptr error_of(const std::string& message, int rank, int peer, const char* op) {
  return std::make_exception_ptr(Error(message, ErrorContext{.rank = rank, .peer = peer, .op = op}));
}

}  // namespace

std::shared_ptr<detail::Completion> MeshTransport::new_completion(int peer) {
  // The progressor is a weak pointer: a Work kept after its group died must not keep the
  // transport (and its thread) alive.
  return std::make_shared<detail::Completion>(std::weak_ptr<detail::Progressor>(weak_from_this()), peer);
}

std::shared_ptr<detail::Completion> MeshTransport::isend(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                                                         std::uint64_t fingerprint) {
  auto completion = new_completion(peer);
  std::lock_guard lock(mutex_);
  if (aborted_) {
    completion->fail(aborted_);
  } else if (peer == rank_) {
    deliver_to_self(data, bytes, tag, fingerprint);
    completion->complete(bytes, rank_);
  } else if (peers_[peer].error) {
    completion->fail(peers_[peer].error);
  } else if (bytes <= kEagerBytes) {
    send_frame(peer, frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data, completion);
  } else {
    std::uint64_t id = next_id_++;
    peers_[peer].awaiting_clearance.emplace(id, PendingSend{data, bytes, tag, completion});
    send_frame(peer, frame(FrameKind::ReadyToSend, tag, bytes, id, fingerprint), nullptr, nullptr);
  }
  return completion;
}

// The common case of a small send, without a Completion: written straight into the stream
// when nothing is queued before it (what the stream does not take is copied and queued).
bool MeshTransport::send_now(int peer, const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint) {
  if (bytes > kEagerBytes || peer == rank_) return false;
  std::lock_guard lock(mutex_);
  Peer& state = peers_[peer];
  if (aborted_ || state.error || !state.connection) return false;
  try {
    if (!state.connection->write_now(frame(FrameKind::Eager, tag, bytes, 0, fingerprint), data)) return false;
  } catch (const Error&) {
    lose_peer(peer, std::current_exception());
    return false;  // isend reports the loss
  }
  if (state.connection->has_output()) watch_output(peer, true);
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
                                                                std::uint64_t tag, const Reduction& reduction,
                                                                std::uint64_t fingerprint) {
  std::lock_guard lock(mutex_);
  // Only where the bytes can be combined straight from the medium; else the caller's scratch
  // copy and reduce cost no more.
  if (peer < 0 || peer == rank_ || !peers_[peer].connection || !peers_[peer].connection->stream().reads_in_place()) {
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

void MeshTransport::post_receive(PostedReceive receive) {
  if (aborted_) {
    receive.completion->fail(aborted_);
    return;
  }
  int peer = receive.source;
  std::uint64_t tag = receive.tag, fingerprint = receive.fingerprint;
  UnexpectedMessage* message = matcher_.find_unexpected(receive);
  if (message != nullptr && conflicting(message->fingerprint, fingerprint)) {
    fail_mismatch(receive, message->source, message->fingerprint);  // the message stays unclaimed
    return;
  }
  if (message == nullptr) {
    if (const UnexpectedMessage* other = matcher_.find_conflicting(receive)) {
      fail_mismatch(receive, other->source, other->fingerprint);
      return;
    }
    for (int source = 0; source < size_; ++source) {
      const Peer& state = peers_[source];
      if ((peer == kAnySource || peer == source) && same_call(state.probe_tag, tag) &&
          conflicting(state.probe_fingerprint, fingerprint)) {
        fail_mismatch(receive, source, state.probe_fingerprint);
        return;
      }
    }
    // Messages that arrived before a peer left are still delivered (above); nothing more will.
    if (peer != kAnySource && peer != rank_ && peers_[peer].error) {
      receive.completion->fail(peers_[peer].error);
      return;
    }
    if (peer == kAnySource && all_peers_lost()) {
      receive.completion->fail(error_of<PeerClosedError>("every peer is gone; nobody is left to send to a receive from any source",
                                                 rank_, -1, "recv"));
      return;
    }
    matcher_.post(std::move(receive));
    return;
  }
  if (!fits(receive, message->source, tag, message->bytes, message->rendezvous ? message->id : 0)) {
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
    clear_to_send(source, id, std::move(receive));
  } else if (message->arrived) {
    deliver(receive, message->payload.data(), message->bytes);
    receive.completion->complete(message->bytes, message->source);
    matcher_.remove_unexpected(message);
  } else {
    message->claimed_by = std::move(receive);  // completed when its payload has arrived
  }
}

std::exception_ptr MeshTransport::mismatch_error(std::uint64_t mine, int source, std::uint64_t theirs) const {
  return error_of<MismatchError>(
      "collective mismatch: this rank called " + detail::describe_fingerprint(mine) + " but " + peer_name(source) +
          " called " + detail::describe_fingerprint(theirs) +
          " in the same slot; every rank of a group must call the same collectives, in the same order, with matching "
          "arguments",
      rank_, source, "collective");
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

// Checks the receive buffer holds the message; if not, fails the receive and tells the sender.
bool MeshTransport::fits(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes, std::uint64_t id) {
  if (bytes <= receive.capacity) return true;
  receive.completion->fail(error_of<InvalidArgumentError>(
      "the message from " + peer_name(source) + " with tag " + std::to_string(tag) + " has " + std::to_string(bytes) +
          " bytes but the receive buffer holds " + std::to_string(receive.capacity) +
          "; post a receive at least as large as what is sent (nothing was truncated: the message is dropped)",
      rank_, source, "recv"));
  if (source != rank_) send_frame(source, frame(FrameKind::Refused, tag, bytes, id, receive.capacity), nullptr, nullptr);
  return false;
}

void MeshTransport::clear_to_send(int peer, std::uint64_t id, PostedReceive receive) {
  peers_[peer].cleared.emplace(id, std::move(receive));
  send_frame(peer, frame(FrameKind::ClearToSend, 0, 0, id), nullptr, nullptr);
}

void MeshTransport::deliver_to_self(const void* data, std::size_t bytes, std::uint64_t tag, std::uint64_t fingerprint) {
  if (auto receive = matcher_.take_receive(rank_, tag)) {
    if (conflicting(receive->fingerprint, fingerprint)) {
      fail_mismatch(*receive, rank_, fingerprint);
    } else if (fits(*receive, rank_, tag, bytes, 0)) {
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
  Peer& state = peers_[peer];
  if (!state.connection) {
    if (on_written) on_written->fail(state.error);
    return;
  }
  state.connection->queue(header, payload, std::move(on_written));
  try {
    if (!state.connection->flush()) watch_output(peer, true);
  } catch (const Error&) {
    // Inside that connection's receive() (answering a frame), the connection must outlive
    // the call: service() loses the peer once receive() has unwound.
    if (peer == servicing_peer_) throw;
    lose_peer(peer, std::current_exception());
  }
}

// Where a matched receive wants its payload: its buffer, overwritten or combined into.
StreamConnection::PayloadTarget MeshTransport::target_of(const PostedReceive& receive) {
  return {static_cast<std::uint8_t*>(receive.data), receive.reduction ? &receive.reduction : nullptr};
}

StreamConnection::PayloadTarget MeshTransport::on_header(StreamConnection& connection, const FrameHeader& header) {
  int peer = connection.peer();
  Peer& state = peers_[peer];
  state.arrival = {};
  switch (header.kind) {
    case FrameKind::Eager: {
      // Eager and ReadyToSend frames carry the sender's call fingerprint in `extra`.
      if (is_probe(header.tag)) {
        state.probe_tag = header.tag;
        state.probe_fingerprint = header.extra;
        fail_conflicting(peer, header.tag, header.extra);
        return {nullptr};
      }
      if (auto receive = matcher_.take_receive(peer, header.tag)) {
        if (conflicting(receive->fingerprint, header.extra)) {
          fail_mismatch(*receive, peer, header.extra);
          return {nullptr};
        }
        if (!fits(*receive, peer, header.tag, header.bytes, 0)) return {nullptr};
        state.arrival.receive = std::move(receive);
        return target_of(*state.arrival.receive);
      }
      UnexpectedMessage message{peer, header.tag, header.bytes, false, 0, false, {}, std::nullopt, header.extra};
      message.payload.resize(header.bytes);
      state.arrival.unexpected = &matcher_.add_unexpected(std::move(message));
      fail_conflicting(peer, header.tag, header.extra);
      return {state.arrival.unexpected->payload.data()};
    }
    case FrameKind::ReadyToSend:
      if (auto receive = matcher_.take_receive(peer, header.tag)) {
        // On a mismatch the sender's message is never cleared: the receiver's failed collective
        // aborts its group, and the Goodbye fails the sender's pending send.
        if (conflicting(receive->fingerprint, header.extra)) {
          fail_mismatch(*receive, peer, header.extra);
        } else if (fits(*receive, peer, header.tag, header.bytes, header.id)) {
          clear_to_send(peer, header.id, std::move(*receive));
        }
      } else {
        matcher_.add_unexpected({peer, header.tag, header.bytes, true, header.id, false, {}, std::nullopt, header.extra});
        fail_conflicting(peer, header.tag, header.extra);
      }
      return {};
    case FrameKind::ClearToSend: {
      auto found = state.awaiting_clearance.find(header.id);
      if (found == state.awaiting_clearance.end()) {
        throw IoError(peer_name(peer) + " cleared an unknown message; protocol error", ErrorContext{.peer = peer});
      }
      PendingSend send = std::move(found->second);
      state.awaiting_clearance.erase(found);
      send_frame(peer, frame(FrameKind::Data, send.tag, send.bytes, header.id), send.data, std::move(send.completion));
      return {};
    }
    case FrameKind::Data: {
      auto found = state.cleared.find(header.id);
      if (found == state.cleared.end() || header.bytes > found->second.capacity) {
        throw IoError(peer_name(peer) + " sent data nobody asked for; protocol error", ErrorContext{.peer = peer});
      }
      state.arrival.receive = std::move(found->second);
      state.cleared.erase(found);
      return target_of(*state.arrival.receive);
    }
    case FrameKind::Goodbye:
      // Its payload, if any, says why the peer left (e.g. the error that aborted its group).
      state.departing = true;
      state.goodbye_reason.assign(header.bytes, '\0');
      return {reinterpret_cast<std::uint8_t*>(state.goodbye_reason.data())};
    case FrameKind::Refused: {
      std::string message = "the send of " + std::to_string(header.bytes) + " bytes with tag " + std::to_string(header.tag) +
                            " to " + peer_name(peer) + " did not fit its receive buffer of " + std::to_string(header.extra) +
                            " bytes; post a receive at least as large as what is sent";
      auto error = error_of<InvalidArgumentError>(message, rank_, peer, "send");
      if (auto found = state.awaiting_clearance.find(header.id); header.id != 0 && found != state.awaiting_clearance.end()) {
        found->second.completion->fail(error);
        state.awaiting_clearance.erase(found);
      } else {
        // An eager send has completed already: its error surfaces on everything that follows
        // with this peer, so the mistake cannot go unnoticed.
        log::get(log::Subsystem::Transport).error("{}", message);
        state.error = error;
      }
      return {};
    }
  }
  throw IoError(peer_name(peer) + " sent a frame of unknown kind " + std::to_string(static_cast<int>(header.kind)),
                ErrorContext{.peer = peer});
}

bool MeshTransport::on_payload(StreamConnection& connection, const FrameHeader& header) {
  Peer& state = peers_[connection.peer()];
  bool completed = false;
  if (state.arrival.receive) {
    state.arrival.receive->completion->complete(header.bytes, connection.peer());
    completed = state.arrival.receive->completion.get() == awaited_;
  } else if (UnexpectedMessage* message = state.arrival.unexpected) {
    message->arrived = true;
    if (message->dropped) {
      matcher_.remove_unexpected(message);
    } else if (message->claimed_by) {
      PostedReceive receive = std::move(*message->claimed_by);
      if (fits(receive, message->source, message->tag, message->bytes, 0)) {
        deliver(receive, message->payload.data(), message->bytes);
        receive.completion->complete(message->bytes, message->source);
        completed = receive.completion.get() == awaited_;
      }
      matcher_.remove_unexpected(message);
    }
  }
  state.arrival = {};
  return completed;
}

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
    std::string why = state.goodbye_reason.empty() ? "it finished, aborted, or destroyed the group" : state.goodbye_reason;
    error = error_of<PeerClosedError>(peer_name(peer) + " has shut down its process group (" + why +
                                          ") while this operation still needed it",
                                      rank_, peer, "transport");
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
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, state.connection->fd(), nullptr);
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
  if (!aborted_) aborted_ = error_of<PeerClosedError>("aborted: " + reason, rank_, -1, "transport");
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && peers_[peer].connection) lose_peer(peer, aborted_);
  }
  for (auto& receive : matcher_.take_receives_from(rank_, true)) receive.completion->fail(aborted_);
}

// Tells every live peer we are going, so it sees an orderly shutdown rather than a crash.
void MeshTransport::say_goodbye(const std::string& reason) {
  for (auto& state : peers_) {
    if (!state.connection) continue;
    state.connection->queue(frame(FrameKind::Goodbye, 0, reason.size()), reason.data(), nullptr);
    try {
      state.connection->flush();
    } catch (const Error&) {
      // That peer is gone already; nothing to tell it.
    }
  }
}

std::unique_ptr<SharedArena> MeshTransport::map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                             std::chrono::milliseconds timeout, std::size_t slot_bytes) {
  if (!capabilities_.same_host_shared_memory) return nullptr;
  return create_shared_arena(store, key, rank, size, timeout, slot_bytes);
}

}  // namespace comm::transport
