// What each frame arriving from a peer does (the receiving side of the message layer's protocol):
// an eager message lands in a posted receive or waits as unexpected, a ReadyToSend is cleared
// once a receive matches, a ClearToSend releases a large send's payload, a Goodbye says why the
// peer leaves, a Refused fails the send that did not fit, an Exclude is answered at once.
#include "transport/message/frame_receiver.hpp"

#include "comm/error.hpp"
#include "libcomm/base/log.hpp"
#include "transport/message/mesh_groups.hpp"
#include "transport/message/mismatch_watch.hpp"
#include "transport/message/progress_engine.hpp"

namespace comm::transport {

// Where a matched receive wants its payload: its buffer, overwritten or combined into.
StreamConnection::PayloadTarget FrameReceiver::target_of(const PostedReceive& receive) {
  return {static_cast<std::uint8_t*>(receive.data), receive.reduction ? &receive.reduction : nullptr};
}

// Inline: every small message passes here, and a call cost the ping-pong 15 instructions.
inline bool FrameReceiver::drops_eager(int peer, const FrameHeader& header) {
  if (groups_.revocations().of_tag(header.tag) != nullptr) [[unlikely]]
    return true;  // of a revoked group: thrown away
  // Eager and ReadyToSend frames carry the sender's call fingerprint in `extra`.
  if (mismatches_.contradicts_my_call(peer, header.tag, header.extra)) return true;  // the group stops
  if (!is_probe(header.tag)) return false;
  mismatches_.note_probe(peer, header.tag, header.extra);
  return true;
}

// A small eager message whose payload came with its header: on_header's Eager case, with the
// receive matched where it is posted and filled at once, so nothing waits in the channel for
// the payload and no receive is moved out of the matcher.
StreamConnection::Sink::Handled FrameReceiver::on_message(StreamConnection& connection, const FrameHeader& header,
                                                          const std::uint8_t* payload) {
  int peer = connection.peer();
  // After a mismatch found in this read nothing more is delivered (on_header says why).
  if (mismatches_.pending() || drops_eager(peer, header)) return Handled::Delivered;
  PostedReceive* receive = matcher_.match(peer, header.tag);
  if (receive == nullptr) {
    matcher_.add_unexpected({peer, header.tag, header.bytes, false, 0, true,
                             std::vector<std::uint8_t>(payload, payload + header.bytes), std::nullopt, header.extra});
    mismatches_.fail_conflicting(peer, header.tag, header.extra);
    return Handled::Delivered;
  }
  if (header.bytes > receive->capacity || conflicting(receive->fingerprint, header.extra)) [[unlikely]] {
    // Taken out before it is failed: telling the sender may throw (a write to this very peer),
    // and a failed receive must not stay posted for the next message.
    PostedReceive failed = std::move(*receive);
    matcher_.remove_matched(receive);
    accepts(failed, peer, header);
    return Handled::Delivered;
  }
  deliver(*receive, payload, header.bytes);
  // Removed after: the matcher's reference keeps a shared completion alive meanwhile.
  bool awaited = complete(*receive->completion, header.bytes, peer);
  matcher_.remove_matched(receive);
  return awaited ? Handled::Completed : Handled::Delivered;
}

inline bool FrameReceiver::complete(detail::Completion& completion, std::size_t bytes, int source) {
  if (&completion != engine_.awaited()) {
    completion.complete(bytes, source);
    return false;
  }
  completion.complete_in_waiter(bytes, source);
  return true;
}

bool FrameReceiver::accepts(const PostedReceive& receive, int peer, const FrameHeader& header) {
  if (conflicting(receive.fingerprint, header.extra)) {
    mismatches_.fail(receive, peer, header.extra);
    return false;
  }
  return fits(receive, peer, header.tag, header.bytes, 0);
}

StreamConnection::PayloadTarget FrameReceiver::on_header(StreamConnection& connection, const FrameHeader& header) {
  int peer = connection.peer();
  Channel& channel = peers_[peer];
  Channel::Arrival& arrival = channel.arrival();
  arrival = {};
  // A mismatch found earlier in this read: nothing after it may complete (a receive of the next
  // call would let this rank leave that call before the group stops).
  if (mismatches_.pending()) return {nullptr};
  switch (header.kind) {
    case FrameKind::Eager: {
      if (drops_eager(peer, header)) return {nullptr};
      if (matcher_.take_receive(peer, header.tag, arrival.receive)) {
        if (accepts(*arrival.receive, peer, header)) return target_of(*arrival.receive);
        arrival.receive.reset();  // failed: nothing completes it on arrival
        return {nullptr};
      }
      UnexpectedMessage message{peer, header.tag, header.bytes, false, 0, false, {}, std::nullopt, header.extra};
      message.payload.resize(header.bytes);
      arrival.unexpected = &matcher_.add_unexpected(std::move(message));
      mismatches_.fail_conflicting(peer, header.tag, header.extra);
      return {arrival.unexpected->payload.data()};
    }
    case FrameKind::ReadyToSend: return on_ready_to_send(peer, header);
    case FrameKind::ClearToSend:
      // The payload goes into the channel's outbox; the channel's flush after this read writes
      // it (data goes down from the send's own step, not from inside a frame handler).
      if (channel.cleared_to_send(header.id) == Channel::Clearance::Unknown) {
        throw IoError(peers_.name(peer) + " cleared an unknown message; protocol error",
                      ErrorContext{.peer = peer});
      }
      return {};
    case FrameKind::Fetched:
      if (channel.fetched(header.id, peer) == Channel::Clearance::Unknown) {
        throw IoError(peers_.name(peer) + " read a message that was not lent to it; protocol error",
                      ErrorContext{.peer = peer});
      }
      return {};
    case FrameKind::Data: {
      arrival.receive = channel.take_expected(header.id);
      // Its receive failed when the group was revoked: the payload is thrown away.
      if (!arrival.receive && groups_.revocations().of_tag(header.tag) != nullptr) return {nullptr};
      if (!arrival.receive || header.bytes > arrival.receive->capacity) {
        throw IoError(peers_.name(peer) + " sent data nobody asked for; protocol error",
                      ErrorContext{.peer = peer});
      }
      return target_of(*arrival.receive);
    }
    case FrameKind::Goodbye:
      // Its payload, if any, says why the peer left (e.g. the error that aborted its group).
      return {channel.hear_goodbye(header.extra, header.id, header.bytes)};
    case FrameKind::Exclude: groups_.answer_exclusion(peer, header); return {};
    case FrameKind::Revoke: return {channel.revoke_buffer(header.bytes)};
    case FrameKind::Refused: on_refused(peer, header); return {};
  }
  throw IoError(
      peers_.name(peer) + " sent a frame of unknown kind " + std::to_string(static_cast<int>(header.kind)),
      ErrorContext{.peer = peer});
}

StreamConnection::PayloadTarget FrameReceiver::on_ready_to_send(int peer, const FrameHeader& header) {
  if (groups_.revocations().of_tag(header.tag) != nullptr) [[unlikely]] {
    // Of a revoked group: never cleared; its sender stops waiting.
    engine_.send_frame(peer, make_frame(FrameKind::Refused, header.tag, header.bytes, header.id, kRevokedCapacity),
                       nullptr, nullptr);
    return {};
  }
  if (mismatches_.contradicts_my_call(peer, header.tag, header.extra)) return {};
  if (std::optional<PostedReceive> receive; matcher_.take_receive(peer, header.tag, receive)) {
    // On a mismatch the sender's message is never cleared: the receiver's failed collective
    // aborts its group, and the Goodbye fails the sender's pending send.
    if (conflicting(receive->fingerprint, header.extra)) {
      mismatches_.fail(*receive, peer, header.extra);
    } else if (fits(*receive, peer, header.tag, header.bytes, header.id)) {
      clear_to_send(peer, header.id, header.lease, header.bytes, std::move(*receive));
    }
  } else {
    UnexpectedMessage message{peer, header.tag, header.bytes, true, header.id, false, {}, std::nullopt, header.extra};
    message.lease = header.lease;
    matcher_.add_unexpected(std::move(message));
    mismatches_.fail_conflicting(peer, header.tag, header.extra);
  }
  return {};
}

void FrameReceiver::on_refused(int peer, const FrameHeader& header) {
  Channel& channel = peers_[peer];
  if (header.extra == kRevokedCapacity) {  // its group was revoked there: never cleared
    const auto* revoked = groups_.revocations().of_tag(header.tag);
    std::exception_ptr error = revoked != nullptr ? *revoked : nullptr;
    if (!error) {
      error = peers_.error<RevokedError>(peers_.name(peer) + " refused a message of a group it revoked", peer, "send");
    }
    channel.fail_send(header.id, error);
    return;
  }
  std::string message = "the send of " + std::to_string(header.bytes) + " bytes with tag " +
                        std::to_string(header.tag) + " to " + peers_.name(peer) +
                        " did not fit its receive buffer of " + std::to_string(header.extra) +
                        " bytes; post a receive at least as large as what is sent";
  auto error = peers_.error<InvalidArgumentError>(message, peer, "send");
  if (header.id == 0 || !channel.fail_send(header.id, error)) {
    // An eager send has completed already: its error surfaces on everything that follows
    // with this peer, so the mistake cannot go unnoticed.
    log::get(log::Subsystem::Transport).error("{}", message);
    channel.set_error(error);
  }
}

bool FrameReceiver::on_payload(StreamConnection& connection, const FrameHeader& header) {
  Channel& channel = peers_[connection.peer()];
  Channel::Arrival& arrival = channel.arrival();
  bool completed = false;
  if (header.kind == FrameKind::Revoke) [[unlikely]] {
    // Read past (on_header) after a mismatch, which stops the whole transport anyway.
    if (mismatches_.pending()) return false;
    // The cause as the revoker saw it; this rank tells the members too (all but the teller).
    int about = header.id > 0 ? static_cast<int>(header.id - 1) : -1;
    auto code = header.extra > 0 ? static_cast<ErrorCode>(header.extra - 1) : ErrorCode::Revoked;
    groups_.revoke_group(static_cast<std::uint32_t>(header.tag), code, channel.revoke_reason(), about, connection.peer());
    return false;
  }
  if (arrival.receive) {
    completed = complete(*arrival.receive->completion, header.bytes, connection.peer());
  } else if (UnexpectedMessage* message = arrival.unexpected) {
    message->arrived = true;
    if (message->dropped) {
      matcher_.remove_unexpected(message);
    } else if (message->claimed_by) {
      PostedReceive receive = std::move(*message->claimed_by);
      if (fits(receive, message->source, message->tag, message->bytes, 0)) {
        deliver(receive, message->payload.data(), message->bytes);
        completed = complete(*receive.completion, message->bytes, message->source);
      }
      matcher_.remove_unexpected(message);
    }
  }
  arrival = {};
  return completed;
}

// Out of line: only a message larger than its receive buffer comes here.
void FrameReceiver::refuse(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes,
                           std::uint64_t id) {
  receive.completion->fail(peers_.error<InvalidArgumentError>(
      "the message from " + peers_.name(source) + " with tag " + std::to_string(tag) + " has " +
          std::to_string(bytes) + " bytes but the receive buffer holds " + std::to_string(receive.capacity) +
          "; post a receive at least as large as what is sent (nothing was truncated: the message is dropped)",
      source, "recv"));
  if (source != peers_.rank())
    engine_.send_frame(source, make_frame(FrameKind::Refused, tag, bytes, id, receive.capacity), nullptr, nullptr);
}

namespace {

// Whether reading a lent message beats having it written through the stream. The ring moves a
// large message with both cores copying at once, in cache-sized pieces; one core's read of the
// sender's memory costs more per byte (its pages pinned one by one, memory to memory) but spares
// the sender's core. Point to point, the sender has nothing else to do: reading is as fast or
// faster up to 128 KiB and slower from 256 KiB (2 ranks, sendrecv_perf, p50 against the ring's:
// 128 KiB 10-15 against 12-15 us; 256 KiB 38-39 against 30-31; 512 KiB 59-63 against 51-57;
// 2 MiB 277-283 against 183-197). In a collective every rank is busy with other transfers (or
// its own block), and reading wins further (all_gather 2 ranks 4 MiB 4.0 against 2.1 GB/s; the
// skewed all_to_all_v at 16 MiB 930-1120 against 1370-2430 us at 2-4 ranks), up to where the ring
// wins again (broadcast and all_gather at 64 MiB: 1.1-1.2 against 1.3-1.6 GB/s at 4 ranks).
// docs/design/transport.md, "Large messages in one copy".
constexpr std::size_t kReadPointToPointUpTo = 128 << 10;
constexpr std::size_t kReadCollectiveUpTo = 16 << 20;

bool worth_reading(std::size_t bytes, std::uint64_t fingerprint) {
  return bytes <= (fingerprint != 0 ? kReadCollectiveUpTo : kReadPointToPointUpTo);
}

}  // namespace

void FrameReceiver::clear_to_send(int peer, std::uint64_t id, std::uint32_t lease, std::size_t bytes,
                                  PostedReceive receive) {
  Channel& channel = peers_[peer];
  LentBuffers* lent =
      lease != 0 && !receive.reduction && worth_reading(bytes, receive.fingerprint) ? lent_buffers_of(channel) : nullptr;
  if (lent != nullptr) {
    switch (lent->fetch(lease, receive.data, bytes)) {
      case LentBuffers::Fetch::Done:
        receive.completion->complete(bytes, peer);
        engine_.send_frame(peer, make_frame(FrameKind::Fetched, 0, 0, id), nullptr, nullptr);
        return;
      case LentBuffers::Fetch::Withdrawn:
        // The sender's send failed (its group revoked, its transport stopping): what was read is
        // void, and the receive waits for the news of why, which fails it (as a cleared receive
        // whose data never comes).
        channel.expect_data(id, std::move(receive));
        return;
      case LentBuffers::Fetch::Unable: break;  // two copies, as without a lease
    }
  }
  channel.expect_data(id, std::move(receive));
  engine_.send_frame(peer, make_frame(FrameKind::ClearToSend, 0, 0, id), nullptr, nullptr);
}

}  // namespace comm::transport
