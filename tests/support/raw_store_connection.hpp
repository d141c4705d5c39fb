// A raw client of the store port, for tests that send what no well-behaved client would, and
// this process's resident memory (what a stranger may make the server hold).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>

#include <cerrno>
#include <fstream>
#include <string>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "rendezvous/tcp_store_protocol.hpp"

namespace comm::testing {

// A raw socket to the store port, for sending what no well-behaved client would.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port, long receive_timeout_seconds = 5) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    timeval limit{receive_timeout_seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  ~RawConnection() { ::close(fd_); }
  void send(const Bytes& bytes) const {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  void send(const std::string& text) const { send(Bytes(text.begin(), text.end())); }
  // True when the server closed the connection (reads end of file or a reset).
  bool closed_by_server() const {
    char buffer[256];
    while (true) {
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0) return false;  // timed out: still open
    }
  }
  // Says hello with the given nonce; returns the server's reply body (status first).
  Bytes say_hello(const Nonce& nonce = Nonce{}, std::uint32_t version = tcp_store_protocol::kVersion) const {
    send(tcp_store_protocol::FrameWriter(static_cast<std::uint8_t>(tcp_store_protocol::RequestType::Hello))
             .u32(tcp_store_protocol::kMagic)
             .u32(version)
             .bytes(nonce)
             .finish());
    return read_reply();
  }
  // One whole reply frame's body; empty when the server closed the connection instead.
  Bytes read_reply() const {
    std::uint8_t length[4];
    if (::recv(fd_, length, sizeof length, MSG_WAITALL) != 4) return {};
    Bytes body(tcp_store_protocol::decode_length(length));
    if (::recv(fd_, body.data(), body.size(), MSG_WAITALL) != static_cast<ssize_t>(body.size())) return {};
    return body;
  }

 private:
  int fd_ = -1;
};

// This process's resident memory, in bytes.
inline std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace comm::testing
