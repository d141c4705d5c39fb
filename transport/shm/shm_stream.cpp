#include "shm_stream.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "comm/error.hpp"
#include "socket_stream.hpp"

namespace comm::transport {
namespace {

constexpr std::size_t kRingBytes = std::size_t{4} << 20;
// The writer publishes (and the reader releases) after at most this much, so the two copies
// of a large message overlap.
constexpr std::size_t kChunkBytes = 256 * 1024;
constexpr std::size_t kRingStride = sizeof(RingHeader) + kRingBytes;
constexpr std::size_t kSegmentBytes = 2 * kRingStride;

Ring ring_at(std::uint8_t* base, int index) {
  auto* start = base + static_cast<std::size_t>(index) * kRingStride;
  return {reinterpret_cast<RingHeader*>(start), start + sizeof(RingHeader), kRingBytes};
}

[[noreturn]] void fail(const std::string& what, const std::string& name) {
  throw IoError(what + " shared memory '" + name + "': " + std::strerror(errno) +
                    "; is /dev/shm mounted and large enough? COMM_TRANSPORT=tcp avoids shared memory",
                ErrorContext{.op = "transport.shm"});
}

std::shared_ptr<SharedSegment> map_segment(int fd, const std::string& name) {
  void* base = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) fail("cannot map", name);
  return std::make_shared<SharedSegment>(base, kSegmentBytes);
}

std::string pair_key(int low, int high) { return "shm/" + std::to_string(low) + "-" + std::to_string(high); }

}  // namespace

SharedSegment::~SharedSegment() { ::munmap(base_, bytes_); }

SharedMemoryPairs::SharedMemoryPairs(Store& store, int rank, int size, const std::string& job_token,
                                     const std::vector<bool>& same_host, std::chrono::milliseconds timeout)
    : ends_(size) {
  // Ring 0 carries low -> high, ring 1 high -> low.
  std::vector<std::string> created(size);
  for (int peer = rank + 1; peer < size; ++peer) {
    if (!same_host[peer]) continue;
    std::string name = "/comm-" + job_token.substr(0, 16) + "-" + std::to_string(::getpid()) + "-" +
                       std::to_string(rank) + "-" + std::to_string(peer);
    int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot create", name);
    linked_.push_back(name);
    if (::ftruncate(fd, static_cast<off_t>(kSegmentBytes)) != 0) {
      ::close(fd);
      fail("cannot size", name);
    }
    auto segment = map_segment(fd, name);
    ends_[peer] = {segment, ring_at(segment->base(), 1), ring_at(segment->base(), 0)};
    created[peer] = name;
    store.set(pair_key(rank, peer), name);
  }
  for (int peer = 0; peer < rank; ++peer) {
    if (!same_host[peer]) continue;
    std::string name = store.get_string(pair_key(peer, rank));
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot open", name);
    auto segment = map_segment(fd, name);
    ends_[peer] = {segment, ring_at(segment->base(), 0), ring_at(segment->base(), 1)};
    store.set(pair_key(peer, rank) + "/mapped", "1");
  }
  for (int peer = rank + 1; peer < size; ++peer) {
    if (created[peer].empty()) continue;
    store.wait({pair_key(rank, peer) + "/mapped"}, timeout);
    ::shm_unlink(created[peer].c_str());
    std::erase(linked_, created[peer]);
  }
}

SharedMemoryPairs::~SharedMemoryPairs() {
  for (const auto& name : linked_) ::shm_unlink(name.c_str());
}

ShmPairEnd SharedMemoryPairs::take(int peer) { return std::move(ends_[peer]); }

ShmStream::ShmStream(ShmPairEnd end, Socket doorbell, int peer, std::string peer_name)
    : end_(std::move(end)), doorbell_(std::move(doorbell)), peer_(peer), peer_name_(std::move(peer_name)) {}

void ShmStream::ring_doorbell() {
  std::uint8_t byte = 1;
  if (::send(doorbell_.fd(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) {
    throw_peer_lost(peer_name_, peer_, "waking it", errno);
  }
}

std::size_t ShmStream::write_some(const iovec* vectors, int count) {
  Ring& ring = end_.outbound;
  std::uint64_t head = ring.header->head.load(std::memory_order_relaxed);
  // The reader's tail lives on a line the reader keeps writing: look at it only when the last
  // value seen leaves too little room (one cache miss fewer per message).
  std::uint64_t tail = known_tail_;
  std::size_t written = 0;
  for (int v = 0; v < count; ++v) {
    auto* source = static_cast<const std::uint8_t*>(vectors[v].iov_base);
    std::size_t left = vectors[v].iov_len;
    while (left > 0) {
      std::size_t room = ring.capacity - static_cast<std::size_t>(head - tail);
      if (room < left) {
        tail = known_tail_ = ring.header->tail.load(std::memory_order_acquire);
        room = ring.capacity - static_cast<std::size_t>(head - tail);
        if (room == 0) break;
      }
      std::size_t offset = static_cast<std::size_t>(head) & (ring.capacity - 1);
      std::size_t take = std::min({left, room, kChunkBytes, ring.capacity - offset});
      std::memcpy(ring.data + offset, source, take);
      source += take;
      left -= take;
      head += take;
      written += take;
      ring.header->head.store(head, std::memory_order_seq_cst);
    }
    if (left > 0) break;
  }
  if (written > 0 && ring.header->reader_sleeping.load(std::memory_order_seq_cst) != 0 &&
      ring.header->reader_sleeping.exchange(0) != 0) {
    ring_doorbell();
  }
  return written;
}

std::size_t ShmStream::read_some(void* data, std::size_t bytes) {
  Ring& ring = end_.inbound;
  std::uint64_t tail = ring.header->tail.load(std::memory_order_relaxed);
  std::uint64_t head = ring.header->head.load(std::memory_order_acquire);
  auto* target = static_cast<std::uint8_t*>(data);
  std::size_t read = 0;
  while (read < bytes) {
    std::size_t available = static_cast<std::size_t>(head - tail);
    if (available == 0) {
      head = ring.header->head.load(std::memory_order_acquire);
      available = static_cast<std::size_t>(head - tail);
      if (available == 0) {
        if (read == 0 && closed_error_ != 0) {
          throw_peer_lost(peer_name_, peer_, "waiting for it", closed_error_ < 0 ? 0 : closed_error_);
        }
        break;
      }
    }
    std::size_t offset = static_cast<std::size_t>(tail) & (ring.capacity - 1);
    std::size_t take = std::min({bytes - read, available, kChunkBytes, ring.capacity - offset});
    std::memcpy(target + read, ring.data + offset, take);
    read += take;
    tail += take;
    ring.header->tail.store(tail, std::memory_order_seq_cst);
  }
  if (read > 0 && ring.header->writer_sleeping.load(std::memory_order_seq_cst) != 0 &&
      ring.header->writer_sleeping.exchange(0) != 0) {
    ring_doorbell();
  }
  return read;
}

void ShmStream::on_wakeup() {
  std::uint8_t scratch[256];
  while (true) {
    ssize_t n = ::recv(doorbell_.fd(), scratch, sizeof scratch, MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      // The peer is gone, but what it wrote before is still in the ring: read_some reports
      // the loss once the ring is empty (a Goodbye there makes it an orderly end).
      closed_error_ = n == 0 ? -1 : errno;
    }
    return;
  }
}

bool ShmStream::prepare_to_sleep(bool want_write) {
  RingHeader& in = *end_.inbound.header;
  in.reader_sleeping.store(1, std::memory_order_seq_cst);
  if (in.head.load(std::memory_order_seq_cst) != in.tail.load(std::memory_order_relaxed)) {
    in.reader_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  if (want_write) {
    RingHeader& out = *end_.outbound.header;
    out.writer_sleeping.store(1, std::memory_order_seq_cst);
    if (out.head.load(std::memory_order_relaxed) - out.tail.load(std::memory_order_seq_cst) < end_.outbound.capacity) {
      out.writer_sleeping.store(0, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

void ShmStream::woke_up() {
  end_.inbound.header->reader_sleeping.store(0, std::memory_order_relaxed);
  end_.outbound.header->writer_sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace comm::transport
