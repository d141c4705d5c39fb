// Fuzz target: what a stranger sends to a store's port (rendezvous/tcp_store_server.hpp): the
// hello, the proof, and any request frames, over a real connection to an in-process server,
// with or without a job secret. The first byte chooses the server and whether a valid hello
// goes first (so that the fuzzer reaches the requests quickly); the rest is sent as it is. The
// server must survive anything, and keep serving a well-behaved client.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "rendezvous/tcp_store_protocol.hpp"

namespace {

namespace protocol = comm::tcp_store_protocol;
constexpr const char* kSecret = "a fuzzing secret of more than 16 characters";

void send_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent <= 0) return;  // the server hung up: fine
    data += sent;
    size -= static_cast<std::size_t>(sent);
  }
}

// Reads what the server answers for a moment, so that it writes into a live connection.
void drain(int fd) {
  std::uint8_t buffer[4096];
  for (int round = 0; round < 4; ++round) {
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, 1) <= 0) return;
    if (::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT) <= 0) return;
  }
}

void check_serving(std::uint16_t port, bool secured) {
  comm::TcpStore client(
      "127.0.0.1", port,
      comm::TcpStoreOptions{.timeout = std::chrono::seconds(10),
                            .job_secret = secured ? std::optional<std::string>(kSecret) : std::nullopt});
  client.set("fuzz/health", "ok");
  if (client.get_string("fuzz/health") != "ok") std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static comm::TcpStoreServer open_server(0, "127.0.0.1", std::nullopt);
  static comm::TcpStoreServer secured_server(0, "127.0.0.1", std::string(kSecret));
  static std::uint64_t runs = 0;
  if (size == 0) return 0;
  bool secured = (data[0] & 1) != 0;
  bool hello_first = (data[0] & 2) != 0;
  std::uint16_t port = secured ? secured_server.port() : open_server.port();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    // libFuzzer's timer signal may interrupt the connect, which then completes on its own.
    pollfd writable{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof error;
    if (errno != EINTR || ::poll(&writable, 1, 5000) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      std::perror("connect to the store under test");
      std::abort();
    }
  }
  timeval limit{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (hello_first) {
    auto hello = protocol::FrameWriter(static_cast<std::uint8_t>(protocol::RequestType::Hello))
                     .u32(protocol::kMagic)
                     .u32(protocol::kVersion)
                     .bytes(comm::Nonce{})
                     .finish();
    send_all(fd, hello.data(), hello.size());
  }
  send_all(fd, data + 1, size - 1);
  drain(fd);
  ::close(fd);
  if (++runs % 1000 == 0) {
    check_serving(open_server.port(), false);
    check_serving(secured_server.port(), true);
  }
  return 0;
}
