#include "transport/tcp/striped_stream.hpp"

#include <algorithm>
#include <array>

namespace comm::transport {
namespace {

constexpr int kMaxVectors = 64;

}  // namespace

StripedSocketStream::StripedSocketStream(std::vector<SocketStream> connections)
    : connections_(std::move(connections)), armed_(connections_.size(), 0) {
  // Registered with no events: only a connection's error or hang-up can wake the set until
  // prepare_to_sleep arms the one a direction waits on.
  for (std::size_t i = 0; i < connections_.size(); ++i) wakeups_.add(connections_[i].wakeup_fd(), 0, i);
}

void StripedSocketStream::advance(Position& position, std::size_t bytes) {
  position.left -= bytes;
  if (position.left > 0) return;
  position.connection = (position.connection + 1) % connections_.size();
  position.left = kStripeBytes;
}

std::size_t StripedSocketStream::write_some(const iovec* vectors, int count) {
  std::size_t total = 0;
  int first = 0;               // the vector the next byte is in,
  std::size_t first_skip = 0;  // and how far into it
  while (first < count) {
    // The vectors from there, cut at the end of the current stripe.
    std::array<iovec, kMaxVectors> part;
    int used = 0;
    std::size_t room = out_.left, offered = 0;
    for (int i = first; i < count && used < kMaxVectors && room > 0; ++i) {
      std::size_t skip = i == first ? first_skip : 0;
      std::size_t take = std::min(vectors[i].iov_len - skip, room);
      if (take == 0) continue;
      part[static_cast<std::size_t>(used++)] = {static_cast<std::uint8_t*>(vectors[i].iov_base) + skip, take};
      room -= take;
      offered += take;
    }
    if (offered == 0) break;
    std::size_t sent = connections_[out_.connection].write_some(part.data(), used);
    if (sent == 0) break;
    total += sent;
    advance(out_, sent);
    // Step past what went.
    for (std::size_t left = sent; left > 0;) {
      std::size_t here = vectors[first].iov_len - first_skip;
      if (left < here) {
        first_skip += left;
        left = 0;
      } else {
        left -= here;
        ++first;
        first_skip = 0;
      }
    }
    while (first < count && vectors[first].iov_len == first_skip) {
      ++first;
      first_skip = 0;
    }
    if (sent < offered) break;  // that connection is full: later stripes must wait for it
  }
  return total;
}

std::size_t StripedSocketStream::read_some(void* data, std::size_t bytes) {
  auto* target = static_cast<std::uint8_t*>(data);
  std::size_t total = 0;
  while (total < bytes) {
    std::size_t wanted = std::min(bytes - total, in_.left);
    std::size_t got = connections_[in_.connection].read_some(target + total, wanted);
    if (got == 0) break;
    total += got;
    advance(in_, got);
    if (got < wanted) break;
  }
  return total;
}

void StripedSocketStream::arm(std::size_t connection, std::uint32_t events) {
  if (armed_[connection] == events) return;
  wakeups_.modify(connections_[connection].wakeup_fd(), events, connection);
  armed_[connection] = events;
}

bool StripedSocketStream::prepare_to_sleep(bool want_write) {
  for (std::size_t i = 0; i < connections_.size(); ++i) {
    std::uint32_t events = (i == in_.connection ? EPOLLIN : 0u) | (want_write && i == out_.connection ? EPOLLOUT : 0u);
    arm(i, events);
  }
  return true;
}

void StripedSocketStream::close_gracefully() noexcept {
  for (auto& connection : connections_) connection.close_gracefully();
}

bool StripedSocketStream::drained_to_end() noexcept {
  bool all = true;
  for (auto& connection : connections_) all = connection.drained_to_end() && all;
  return all;
}

}  // namespace comm::transport
