#include "transport/tcp/socket_stream.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "comm/error.hpp"

namespace comm::transport {

SocketStream::SocketStream(Socket socket, int peer, std::string peer_name)
    : socket_(std::move(socket)), peer_(peer), peer_name_(std::move(peer_name)) {}

void SocketStream::lost(const char* what, int error) const { throw_peer_lost(peer_name_, peer_, what, error); }

std::size_t SocketStream::write_some(const iovec* vectors, int count) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(vectors);
  message.msg_iovlen = static_cast<std::size_t>(count);
  ssize_t sent = ::sendmsg(socket_.fd(), &message, MSG_NOSIGNAL);
  if (sent < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    lost("sending", errno);
  }
  return static_cast<std::size_t>(sent);
}

// A socket closed with unread input is reset, not ended, and a reset makes the peer's kernel throw
// away what its program had not read yet: the Goodbye that says why this rank stopped (a peer
// then saw "closed the connection" where it should have seen the mismatch). So: end the sending
// side after what is queued in the kernel, then drop the input that is here.
void SocketStream::close_gracefully() noexcept {
  ::shutdown(socket_.fd(), SHUT_WR);
  char discarded[4096];
  while (::recv(socket_.fd(), discarded, sizeof discarded, MSG_DONTWAIT) > 0) {
  }
}

bool SocketStream::drained_to_end() noexcept {
  char discarded[4096];
  while (true) {
    ssize_t n = ::recv(socket_.fd(), discarded, sizeof discarded, MSG_DONTWAIT);
    if (n > 0) continue;
    return !(n < 0 && (errno == EAGAIN || errno == EINTR));  // end of file, or an error: over
  }
}

std::size_t SocketStream::read_some(void* data, std::size_t bytes) {
  ssize_t n = ::recv(socket_.fd(), data, bytes, 0);
  if (n == 0) lost("receiving", 0);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    lost("receiving", errno);
  }
  return static_cast<std::size_t>(n);
}

}  // namespace comm::transport
