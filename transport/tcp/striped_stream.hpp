// Several TCP connections to one peer as one ordered byte stream, for links that one connection
// cannot fill (a network that caps each flow, a path whose round trip times the bandwidth is
// more than one socket's window: what NCCL's several sockets per peer are for).
//
// The stream is cut into stripes of kStripeBytes, dealt to the connections in turn: stripe i
// goes whole over connection i mod N, and the reader takes stripe i from there, so order needs
// no sequence numbers and no reassembly buffer. A writer that finds its connection full stops
// there (later stripes must not overtake it); so does a reader whose connection has nothing
// yet. Nothing can deadlock: every byte a reader waits for was written before anything the
// writer is now stuck on.
//
// The progress thread sleeps on one descriptor per peer: an epoll set of the connections that
// is readable when the connection the reader waits on has data, or (when output is queued) the
// one the writer waits on has room.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/epoll_set.hpp"
#include "transport/tcp/socket_stream.hpp"

namespace comm::transport {

class StripedSocketStream final : public ByteStream {
 public:
  static constexpr std::size_t kStripeBytes = 128 * 1024;

  // `connections`: two or more, in the order both ends agreed (the handshake's stream index).
  explicit StripedSocketStream(std::vector<SocketStream> connections);
  std::size_t write_some(const iovec* vectors, int count) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  int wakeup_fd() const override { return wakeups_.fd(); }
  bool prepare_to_sleep(bool want_write) override;
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "tcp"; }
  void close_gracefully() noexcept override;
  bool drained_to_end() noexcept override;

 private:
  // Where one direction is in the stripes: the connection of the current stripe and what is left of it.
  struct Position {
    std::size_t connection = 0;
    std::size_t left = kStripeBytes;
  };
  void advance(Position& position, std::size_t bytes);
  void arm(std::size_t connection, std::uint32_t events);

  std::vector<SocketStream> connections_;
  EpollSet wakeups_;
  std::vector<std::uint32_t> armed_;  // by connection: the events wakeups_ holds for it
  Position out_, in_;
};

}  // namespace comm::transport
