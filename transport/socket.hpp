// Small POSIX socket helpers for the TCP transport: an owning descriptor, addresses as text,
// and deadline-bounded blocking I/O for the connection handshake.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

namespace comm::transport {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = other.release();
    }
    return *this;
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

 private:
  int fd_ = -1;
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // "1.2.3.4:5" or "[::1]:5"
  std::string to_string() const;
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  // Parses what to_string() writes; throws InvalidArgumentError.
  static SocketAddress parse(const std::string& text);
};

using Deadline = std::chrono::steady_clock::time_point;

void set_nonblocking(int fd);
void set_no_delay(int fd);
// setsockopt with an int value; an IoError naming the option when the kernel refuses it.
void set_option(int fd, int level, int option, int value, const char* name);
[[noreturn]] void fail_socket_option(const char* name);
// Blocking-style I/O on a non-blocking socket, bounded by the deadline. False on timeout or
// when the peer closed; `error` then says which.
bool send_all(int fd, std::span<const std::uint8_t> bytes, Deadline deadline, std::string& error);
bool receive_all(int fd, std::span<std::uint8_t> bytes, Deadline deadline, std::string& error);

}  // namespace comm::transport
