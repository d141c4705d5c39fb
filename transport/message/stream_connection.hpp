// One connection to one peer over a byte stream (a TCP socket, or a pair of shared-memory
// rings): frames out (a queue written as the stream accepts), frames in (parsed from a staging
// buffer; large payloads are read straight into their destination). It knows nothing of
// matching: each arriving header is handed to a Sink, which says where its payload goes. The
// owning transport serialises all calls.
//
// Frame: a 40-byte header {u8 kind, 3 reserved, u32 lease, u64 tag, u64 bytes, u64 id, u64 extra} in host byte order
// (every supported platform is little-endian), then `bytes` of payload for Eager and Data.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "libcomm/base/completion.hpp"
#include "transport/transport.hpp"
#include "transport/medium.hpp"

namespace comm::transport {

enum class FrameKind : std::uint8_t {
  Eager = 1,    // tag, bytes, payload follows
  ReadyToSend,  // tag, bytes, id: a large message waits for the receiver's ClearToSend; with a
                // lease (header.lease), the receiver may read it from the sender's memory instead
                // (lent_buffers.hpp) and answer Fetched
  ClearToSend,  // id: the receiver matched it; send the payload
  Data,         // id, bytes, payload follows
  Refused,      // tag, bytes (the message), id (the sender's, 0 if eager), extra (the receiver's
                // capacity): the message did not fit the receive buffer; a capacity of
                // kRevokedCapacity: its group was revoked and it will never be cleared
  Goodbye,      // the sender is shutting its process group down: end of file follows; payload: why
  Revoke,       // tag: a group id; id: 1 + the rank the cause names (0: none); extra: 1 + its
                // ErrorCode; payload: the cause's message. The group's transfers stop.
  Exclude,      // tag: where to answer; id: a shrink agreement (the id of the group it makes):
                // the sender would leave this rank out of it (Transport::ask_to_exclude)
  Fetched,      // id: the receiver read the lent message whole; the send is complete
};

// Whether a frame of this kind carries `bytes` of payload after its header.
inline bool has_payload(FrameKind kind) {
  return kind == FrameKind::Eager || kind == FrameKind::Data || kind == FrameKind::Goodbye || kind == FrameKind::Revoke;
}

constexpr std::uint64_t kRevokedCapacity = ~std::uint64_t{0};

struct FrameHeader {
  FrameKind kind;
  std::uint8_t reserved[3];
  std::uint32_t lease;  // ReadyToSend: the sender's lease on its buffer (0: none)
  std::uint64_t tag;
  std::uint64_t bytes;
  std::uint64_t id;
  std::uint64_t extra;
};
static_assert(sizeof(FrameHeader) == 40);

// Frames whose payload is a caller's buffer (what a revoked group lets go of).
inline bool carries_callers_bytes(FrameKind kind) { return kind == FrameKind::Eager || kind == FrameKind::Data; }

inline FrameHeader make_frame(FrameKind kind, std::uint64_t tag, std::uint64_t bytes, std::uint64_t id = 0,
                              std::uint64_t extra = 0) {
  FrameHeader header{};
  header.kind = kind;
  header.tag = tag;
  header.bytes = bytes;
  header.id = id;
  header.extra = extra;
  return header;
}

class StreamConnection {
 public:
  struct PayloadTarget {
    std::uint8_t* data = nullptr;         // nullptr with a payload: read and throw away
    const Combiner* reduction = nullptr;  // set: combine the payload into data (valid until on_payload)
  };
  class Sink {
   public:
    virtual ~Sink() = default;
    // An eager message of at most kWholeMessageBytes whose payload has arrived with its header
    // (most small messages): matched and delivered in one step, straight from the inbox or from
    // the record the medium lends (ByteStream::lend_record), with nothing kept between header
    // and payload. NotHere leaves it to on_header and on_payload.
    enum class Handled { NotHere, Delivered, Completed };
    virtual Handled on_message(StreamConnection& /*connection*/, const FrameHeader& /*header*/,
                               const std::uint8_t* /*payload*/) {
      return Handled::NotHere;
    }
    virtual PayloadTarget on_header(StreamConnection& connection, const FrameHeader& header) = 0;
    // True when the frame completed the operation the polling thread waits for.
    virtual bool on_payload(StreamConnection& connection, const FrameHeader& header) = 0;
  };
  static constexpr std::size_t kWholeMessageBytes = 1024;
  // Whether a frame goes to Sink::on_message when `available` bytes follow its header.
  static bool whole_message(const FrameHeader& header, std::size_t available) {
    return header.kind == FrameKind::Eager && header.bytes <= kWholeMessageBytes && available >= header.bytes;
  }

  StreamConnection(int peer, std::string peer_name, std::unique_ptr<ByteStream> stream);

  ByteStream& stream() { return *stream_; }
  int fd() const { return stream_->wakeup_fd(); }
  int peer() const { return peer_; }
  const std::string& peer_name() const { return peer_name_; }

  // Queues a frame; `payload` (header.bytes of it for Eager and Data) must stay valid until
  // `on_written` completes, which happens once the last byte is handed to the kernel.
  void queue(const FrameHeader& header, const void* payload, std::shared_ptr<detail::Completion> on_written);
  // Writes a frame at once when nothing is queued before it; what the stream does not take is
  // copied and queued, so the caller's payload is free on return. False: nothing was written
  // (output is queued, or the stream is full); queue() it instead.
  // Inline: every small send passes here.
  bool write_now(const FrameHeader& header, const void* payload) {
    if (!outbox_.empty()) return false;
    std::size_t payload_bytes = has_payload(header.kind) ? header.bytes : 0;
    iovec vectors[2] = {{const_cast<FrameHeader*>(&header), sizeof(FrameHeader)},
                        {const_cast<void*>(payload), payload_bytes}};
    std::size_t written = stream_->write_some(vectors, payload_bytes > 0 ? 2 : 1);
    bytes_moved_ += written;
    if (written == sizeof(FrameHeader) + payload_bytes) [[likely]]
      return true;
    return keep_rest(header, payload, payload_bytes, written);
  }
  // Writes what the socket takes now; true when nothing is left queued.
  bool flush();
  bool has_output() const { return !outbox_.empty(); }
  // Bytes moved in either direction so far (to tell whether a poll achieved anything).
  std::uint64_t bytes_moved() const { return bytes_moved_; }
  // Reads what is available and dispatches every complete header and payload; returns early,
  // with nothing left buffered, once a frame completed what the caller waits for.
  void receive(Sink& sink);
  // The completions of queued writes, for failing them when the connection is lost.
  std::vector<std::shared_ptr<detail::Completion>> take_queued();
  // Lets go of callers' memory for the Eager and Data frames `chosen` picks (a revoked group's):
  // the rest of such a payload being read is thrown away; of such frames queued to write, one
  // begun keeps its payload (copied) and the others are dropped. Returns the completions of the
  // writes let go, for the caller to fail.
  std::vector<std::shared_ptr<detail::Completion>> release(const std::function<bool(const FrameHeader&)>& chosen);

 private:
  struct Outgoing {
    FrameHeader header;
    const std::uint8_t* payload;
    std::size_t payload_bytes;
    std::size_t written = 0;  // of header + payload
    std::shared_ptr<detail::Completion> on_written;
    std::vector<std::uint8_t> owned;  // the payload, when the caller's buffer could not be kept
  };
  // After a write_now the stream took only `written` bytes of: false when none (nothing is
  // queued); else the rest is copied and queued.
  bool keep_rest(const FrameHeader& header, const void* payload, std::size_t payload_bytes, std::size_t written);
  bool consume(Sink& sink);
  // A whole small message the stream lends in place (one record, one Eager frame), handed to
  // on_message where it lies and released. What it found: a message (Delivered, Completed),
  // nothing arrived (Nothing: no read needed), or something to read instead (Read).
  enum class Lent { Read, Nothing, Delivered, Completed };
  Lent take_lent_message(Sink& sink);
  // Puts `bytes` more of the current payload into its target: copied, or combined whole
  // elements at a time (a partial element waits in carry_ for the rest).
  void deliver(const std::uint8_t* run, std::size_t bytes);
  class Deliverer;

  int peer_;
  std::string peer_name_;
  std::unique_ptr<ByteStream> stream_;
  std::deque<Outgoing> outbox_;
  std::uint64_t bytes_moved_ = 0;

  // Receiving: a staging buffer, and the frame being read.
  std::vector<std::uint8_t> inbox_;
  std::size_t inbox_begin_ = 0, inbox_end_ = 0;
  bool in_payload_ = false;
  FrameHeader current_{};
  std::uint8_t* payload_target_ = nullptr;
  std::size_t payload_done_ = 0;
  const Combiner* reduction_ = nullptr;
  alignas(16) std::uint8_t carry_[16] = {};
  std::size_t carry_bytes_ = 0;
};

}  // namespace comm::transport
