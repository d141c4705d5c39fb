// Everything the message layer knows about one peer, in one place: its connection (or the frames
// waiting for one made on first use), our large sends waiting for its clearance and their large
// sends we cleared, the frame arriving from it now, what it said when it left (Goodbye), its
// latest probe, and why it is unusable. The message layer (MeshTransport) routes each transfer
// to its peer's channel; the protocol's decisions that involve more than one peer (matching,
// mismatches, revocation) are the layer's and its services', told by the channel's events.
//
// A channel is used under its transport's lock (docs/design/transport.md, "The message layer
// around the peer": a lock per channel comes with the progress engine, step 4).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "libcomm/base/completion.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/stream_connection.hpp"

namespace comm::transport {

class Channel {
 public:
  // A large send of ours, announced (ReadyToSend) and waiting for the peer's ClearToSend, or
  // for its Fetched when its buffer is lent (`lease`: lent_buffers.hpp).
  struct PendingSend {
    const void* data;
    std::size_t bytes;
    std::uint64_t tag;
    std::shared_ptr<detail::Completion> completion;
    Lease lease;  // settled before the send completes or fails, and when dropped
  };
  // Where the payload of the frame now arriving goes.
  struct Arrival {
    std::optional<PostedReceive> receive;
    UnexpectedMessage* unexpected = nullptr;
  };
  enum class Sent {
    Written,  // handed to the stream whole
    Queued,   // part or all of it waits for room: the progress thread must watch for it
    Waiting,  // no connection yet: it leaves once one is made (connect on first use)
    Failed,   // the peer is lost; `on_written` failed with why
  };

  // The connection (null: not made yet, or lost).
  StreamConnection* connection() const { return connection_.get(); }
  // Gone for good: its connection closed (a channel may also carry an error with its connection
  // open, such as a refused message's, and still be told things).
  bool lost() const { return !connection_ && error_; }
  // Why transfers with this peer fail (null: they do not).
  const std::exception_ptr& error() const { return error_; }
  void set_error(std::exception_ptr error) {
    if (!error_) error_ = std::move(error);
  }

  // Queues a frame and writes what the stream takes; without a connection it waits for one
  // when `connect_later`, else fails `on_written`. Throws the stream's error on a failed write.
  Sent send(const FrameHeader& header, const void* payload, std::shared_ptr<detail::Completion> on_written,
            bool connect_later);
  // The connection made on first use: the frames that waited for it are queued on it (not
  // written: see flush()).
  void attach(std::unique_ptr<StreamConnection> connection);
  // Writes the queued frames the stream takes; true when something is still queued. Throws the
  // stream's error.
  bool flush() { return connection_ && connection_->has_output() && !connection_->flush(); }
  // Whether the progress thread is to wake when the stream has room; true when that changed
  // (then the caller tells the thread: a system call, so only on a change).
  bool watch_output(bool on) { return std::exchange(output_watched_, on) != on; }

  // Our large sends. The peer's ClearToSend for `id` queues the send's Data frame here, written
  // by this channel's flush (never from inside the handler that read the ClearToSend); false
  // when `id` is unknown (a protocol error), or was withdrawn (then nothing is sent).
  void await_clearance(std::uint64_t id, PendingSend send) { awaiting_clearance_.emplace(id, std::move(send)); }
  enum class Clearance { Queued, Withdrawn, Unknown };
  Clearance cleared_to_send(std::uint64_t id);
  // The peer read send `id`'s lent buffer (its Fetched frame): the send completes. Queued here
  // means completed.
  Clearance fetched(std::uint64_t id, int peer);
  // The peer refused send `id` (it did not fit, or its group was revoked there): fails it.
  bool fail_send(std::uint64_t id, const std::exception_ptr& error);

  // Their large sends we cleared, waiting for the Data frame.
  void expect_data(std::uint64_t id, PostedReceive receive) { cleared_.emplace(id, std::move(receive)); }
  std::optional<PostedReceive> take_expected(std::uint64_t id);

  Arrival& arrival() { return arrival_; }

  // The peer's Goodbye: the buffer its reason is read into.
  std::uint8_t* hear_goodbye(std::uint64_t code, std::uint64_t about, std::size_t bytes);
  // Whether it left after its work was done (a Goodbye naming no error): its loss revokes nothing.
  bool left_in_order() const { return departing_ && goodbye_code_ == 0; }
  // What the loss of this peer fails things with: the error its Goodbye named (of its type,
  // about the rank it named), an orderly shutdown, or `error` (its stream's), given context.
  std::exception_ptr loss_error(std::exception_ptr error, int rank, int peer, const std::string& peer_name,
                                bool quietly) const;
  // Fails everything pending with this peer and drops the connection; returns the descriptor the
  // progress thread must stop watching (-1: none).
  int fail_all(const std::exception_ptr& error);

  // Lets go of callers' memory for the frames and transfers `of_group` picks (a revoked group's):
  // everything pending of it fails with `error`; large sends announced are withdrawn.
  void release(const std::function<bool(std::uint64_t tag)>& of_group, const std::exception_ptr& error);

  // The peer's latest probe (an empty Eager frame on a collective's last step).
  void note_probe(std::uint64_t tag, std::uint64_t fingerprint) {
    probe_tag_ = tag;
    probe_fingerprint_ = fingerprint;
  }
  std::uint64_t probe_tag() const { return probe_tag_; }
  std::uint64_t probe_fingerprint() const { return probe_fingerprint_; }

  // The payload of a Revoke frame arriving: read into revoke_buffer, read back whole.
  std::uint8_t* revoke_buffer(std::size_t bytes) {
    revoke_reason_.assign(bytes, '\0');
    return reinterpret_cast<std::uint8_t*>(revoke_reason_.data());
  }
  const std::string& revoke_reason() const { return revoke_reason_; }

 private:
  // A frame for a peer still being connected (on first use): sent once it is.
  struct WaitingFrame {
    FrameHeader header;
    const void* payload;
    std::shared_ptr<detail::Completion> on_written;
  };

  // Before awaiting_clearance_, so that its leases (on the connection's stream) end first.
  std::unique_ptr<StreamConnection> connection_;                       // null once lost (or not yet made)
  std::vector<WaitingFrame> waiting_;                                  // for a connection under way
  std::exception_ptr error_;                                           // why it is unusable
  std::unordered_map<std::uint64_t, PendingSend> awaiting_clearance_;  // our large sends
  std::unordered_map<std::uint64_t, PostedReceive> cleared_;           // their large sends
  std::unordered_set<std::uint64_t> withdrawn_;                        // our large sends of a revoked group: never sent
  Arrival arrival_;
  bool departing_ = false;  // said Goodbye: its end of file is an orderly shutdown
  std::string goodbye_reason_;
  std::uint64_t goodbye_code_ = 0;  // 1 + the ErrorCode of why it left; 0: not said
  std::uint64_t goodbye_peer_ = 0;  // 1 + the rank that error was about; 0: none
  std::uint64_t probe_tag_ = 0, probe_fingerprint_ = 0;
  std::string revoke_reason_;
  bool output_watched_ = false;
};

// The leases of `channel`'s stream (lent_buffers.hpp): null without a connection, or where its
// medium cannot read the peer's memory.
inline LentBuffers* lent_buffers_of(const Channel& channel) {
  return channel.connection() != nullptr ? channel.connection()->stream().lent_buffers() : nullptr;
}

}  // namespace comm::transport
