// What each frame arriving from a peer does: the receiving side of the message layer's
// protocol. An eager message lands in a posted receive (matched in place when it came whole) or
// waits as unexpected; a ReadyToSend is read from the sender's memory (Fetched) or cleared once
// a receive matches; a ClearToSend queues the large send's payload in its channel, a Fetched
// completes it; a Goodbye says why the peer leaves; a Refused fails the
// send that did not fit; an Exclude is answered at once; a Revoke revokes the group here too.
//
// The channel's connection calls it from inside a read (StreamConnection::Sink), under the
// message layer's lock.
#pragma once

#include <cstdint>
#include <optional>

#include "transport/message/matcher.hpp"
#include "transport/message/peers.hpp"
#include "transport/message/stream_connection.hpp"

namespace comm::transport {

class ProgressEngine;
class MismatchWatch;
class MeshGroups;

class FrameReceiver final : public StreamConnection::Sink {
 public:
  FrameReceiver(Peers& peers, Matcher& matcher, ProgressEngine& engine, MismatchWatch& mismatches,
                MeshGroups& groups)
      : peers_(peers), matcher_(matcher), engine_(engine), mismatches_(mismatches), groups_(groups) {}

  Handled on_message(StreamConnection& connection, const FrameHeader& header, const std::uint8_t* payload) override;
  StreamConnection::PayloadTarget on_header(StreamConnection& connection, const FrameHeader& header) override;
  bool on_payload(StreamConnection& connection, const FrameHeader& header) override;

  // Whether the receive buffer holds the message; if not, fails the receive and tells the
  // sender (`id`: the sender's, for a large message).
  bool fits(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes, std::uint64_t id) {
    if (bytes <= receive.capacity) [[likely]]
      return true;
    refuse(receive, source, tag, bytes, id);
    return false;
  }
  // Takes a peer's large message (ReadyToSend `id`, `bytes` long) into `receive`: read straight
  // from the sender's memory when it lent it (`lease`) and the receive copies rather than
  // combines, else cleared, for the sender to write through the stream.
  void clear_to_send(int peer, std::uint64_t id, std::uint32_t lease, std::size_t bytes, PostedReceive receive);

 private:
  void refuse(const PostedReceive& receive, int source, std::uint64_t tag, std::size_t bytes, std::uint64_t id);
  // Whether an eager frame goes no further: of a revoked group or of a call this rank began
  // differently (thrown away), or a probe (noted).
  bool drops_eager(int peer, const FrameHeader& header);
  // Whether the receive an eager frame matched takes it; if not (another call, too small), it
  // is failed and the sender told.
  bool accepts(const PostedReceive& receive, int peer, const FrameHeader& header);
  StreamConnection::PayloadTarget on_ready_to_send(int peer, const FrameHeader& header);
  void on_refused(int peer, const FrameHeader& header);
  static StreamConnection::PayloadTarget target_of(const PostedReceive& receive);
  // Completes a receive; true when it is what the reading thread waits for (then that waiter
  // completes its own, Completion::complete_in_waiter). Once completed, another thread's waiter
  // may return and free its completion: the caller touches it no more.
  bool complete(detail::Completion& completion, std::size_t bytes, int source);

  Peers& peers_;
  Matcher& matcher_;
  ProgressEngine& engine_;
  MismatchWatch& mismatches_;
  MeshGroups& groups_;
};

}  // namespace comm::transport
