// A connected, non-blocking TCP socket as a ByteStream.
#pragma once

#include <string>

#include "transport/medium.hpp"
#include "transport/socket.hpp"

namespace comm::transport {

class SocketStream final : public ByteStream {
 public:
  SocketStream(Socket socket, int peer, std::string peer_name);
  std::size_t write_some(const iovec* vectors, int count) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  int wakeup_fd() const override { return socket_.fd(); }
  bool prepare_to_sleep(bool) override { return true; }
  bool writes_wake_through_fd() const override { return true; }
  const char* medium() const override { return "tcp"; }
  void close_gracefully() noexcept override;
  bool drained_to_end() noexcept override;

 private:
  [[noreturn]] void lost(const char* what, int error) const;
  Socket socket_;
  int peer_;
  std::string peer_name_;
};

}  // namespace comm::transport
