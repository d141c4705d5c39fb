// One TCP connection to one peer: frames out (a queue written with writev as the socket
// accepts), frames in (parsed from a staging buffer; large payloads are read straight into
// their destination). It knows nothing of matching: each arriving header is handed to a Sink,
// which says where its payload goes. The owning transport serialises all calls.
//
// Frame: a 40-byte header {u8 kind, 7 reserved, u64 tag, u64 bytes, u64 id, u64 extra} in host byte order
// (every supported platform is little-endian), then `bytes` of payload for Eager and Data.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "completion.hpp"
#include "socket.hpp"

namespace comm::transport {

enum class FrameKind : std::uint8_t {
  Eager = 1,     // tag, bytes, payload follows
  ReadyToSend,   // tag, bytes, id: a large message waits for the receiver's ClearToSend
  ClearToSend,   // id: the receiver matched it; send the payload
  Data,          // id, bytes, payload follows
  Refused,       // tag, bytes (the message), id (the sender's, 0 if eager), extra (the receiver's
                 // capacity): the message did not fit the receive buffer
  Goodbye,       // the sender is shutting its process group down: end of file follows
};

struct FrameHeader {
  FrameKind kind;
  std::uint8_t reserved[7];
  std::uint64_t tag;
  std::uint64_t bytes;
  std::uint64_t id;
  std::uint64_t extra;
};
static_assert(sizeof(FrameHeader) == 40);

class TcpConnection {
 public:
  struct PayloadTarget {
    std::uint8_t* data = nullptr;  // nullptr with a payload: read and throw away
  };
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual PayloadTarget on_header(TcpConnection& connection, const FrameHeader& header) = 0;
    virtual void on_payload(TcpConnection& connection, const FrameHeader& header) = 0;
  };

  TcpConnection(int peer, std::string peer_name, Socket socket);

  int fd() const { return socket_.fd(); }
  int peer() const { return peer_; }
  const std::string& peer_name() const { return peer_name_; }

  // Queues a frame; `payload` (header.bytes of it for Eager and Data) must stay valid until
  // `on_written` completes, which happens once the last byte is handed to the kernel.
  void queue(const FrameHeader& header, const void* payload, std::shared_ptr<detail::Completion> on_written);
  // Writes what the socket takes now; true when nothing is left queued.
  bool flush();
  bool has_output() const { return !outbox_.empty(); }
  // Reads what is available and dispatches every complete header and payload.
  void receive(Sink& sink);
  // The completions of queued writes, for failing them when the connection is lost.
  std::vector<std::shared_ptr<detail::Completion>> take_queued();

 private:
  struct Outgoing {
    FrameHeader header;
    const std::uint8_t* payload;
    std::size_t payload_bytes;
    std::size_t written = 0;  // of header + payload
    std::shared_ptr<detail::Completion> on_written;
  };
  [[noreturn]] void lost(const char* what, int error) const;
  void consume(Sink& sink);

  int peer_;
  std::string peer_name_;
  Socket socket_;
  std::deque<Outgoing> outbox_;

  // Receiving: a staging buffer, and the frame being read.
  std::vector<std::uint8_t> inbox_;
  std::size_t inbox_begin_ = 0, inbox_end_ = 0;
  bool in_payload_ = false;
  FrameHeader current_{};
  std::uint8_t* payload_target_ = nullptr;
  std::size_t payload_done_ = 0;
};

}  // namespace comm::transport
