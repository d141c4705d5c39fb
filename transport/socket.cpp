#include "transport/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "comm/error.hpp"

namespace comm::transport {

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string SocketAddress::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET6) {
    const auto* address = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &address->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(address->sin6_port));
  }
  const auto* address = reinterpret_cast<const sockaddr_in*>(&storage);
  ::inet_ntop(AF_INET, &address->sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address->sin_port));
}

std::uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

void SocketAddress::set_port(std::uint16_t port) {
  if (storage.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  }
}

SocketAddress SocketAddress::parse(const std::string& text) {
  SocketAddress result;
  auto colon = text.rfind(':');
  if (colon == std::string::npos) throw InvalidArgumentError("'" + text + "' is not an address:port");
  std::string host = text.substr(0, colon);
  std::string port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    throw InvalidArgumentError("'" + text + "' is not an address:port");
  }
  auto port = static_cast<std::uint16_t>(std::stoi(port_text));
  if (host.size() > 2 && host.front() == '[') {
    auto* address = reinterpret_cast<sockaddr_in6*>(&result.storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(port);
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &address->sin6_addr) != 1) {
      throw InvalidArgumentError("'" + text + "' is not an IPv6 address:port");
    }
    result.length = sizeof(sockaddr_in6);
  } else {
    auto* address = reinterpret_cast<sockaddr_in*>(&result.storage);
    address->sin_family = AF_INET;
    address->sin_port = htons(port);
    if (::inet_pton(AF_INET, host.c_str(), &address->sin_addr) != 1) {
      throw InvalidArgumentError("'" + text + "' is not an IPv4 address:port");
    }
    result.length = sizeof(sockaddr_in);
  }
  return result;
}

void set_nonblocking(int fd) {
  // A socket left blocking would stall the progress thread inside a read: not something to go on from.
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail_socket_option("O_NONBLOCK");
}

void set_no_delay(int fd) { set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"); }

void set_option(int fd, int level, int option, int value, const char* name) {
  if (::setsockopt(fd, level, option, &value, sizeof value) != 0) fail_socket_option(name);
}

void fail_socket_option(const char* name) {
  throw IoError(std::string("cannot set ") + name + " on a socket: " + std::strerror(errno),
                ErrorContext{.op = "transport"});
}

namespace {

// Waits until fd is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Deadline deadline, std::string& error) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error = "timed out";
      return false;
    }
    pollfd watched{fd, events, 0};
    int ready = ::poll(&watched, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) {
      error = std::strerror(errno);
      return false;
    }
  }
}

}  // namespace

namespace {

// Moves every byte with `io` (send or recv), waiting for readiness up to the deadline.
template <class Io>
bool transfer_all(int fd, std::uint8_t* bytes, std::size_t size, short events, Deadline deadline, std::string& error,
                  const char* closed, Io&& io) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = io(bytes + done, size - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_ready(fd, events, deadline, error)) return false;
    } else {
      error = n == 0 ? closed : std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace

bool send_all(int fd, std::span<const std::uint8_t> bytes, Deadline deadline, std::string& error) {
  return transfer_all(fd, const_cast<std::uint8_t*>(bytes.data()), bytes.size(), POLLOUT, deadline, error,
                      "connection closed",
                      [&](std::uint8_t* at, std::size_t left) { return ::send(fd, at, left, MSG_NOSIGNAL); });
}

bool receive_all(int fd, std::span<std::uint8_t> bytes, Deadline deadline, std::string& error) {
  return transfer_all(fd, bytes.data(), bytes.size(), POLLIN, deadline, error, "connection closed by the other side",
                      [&](std::uint8_t* at, std::size_t left) { return ::recv(fd, at, left, 0); });
}

}  // namespace comm::transport
