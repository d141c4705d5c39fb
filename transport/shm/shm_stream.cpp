#include "transport/shm/shm_stream.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "comm/error.hpp"
#include "transport/shm/shm_segment.hpp"
#include "transport/stream_connection.hpp"

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
  // Populated at once: faulting the rings' pages in lazily cost ~6 us per 2 KiB message during
  // the first pass through a ring (a page fault on each side every other message).
  void* base = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) fail("cannot map", name);
  return std::make_shared<SharedSegment>(base, kSegmentBytes);
}

std::string pair_key(int low, int high) { return "shm/" + std::to_string(low) + "-" + std::to_string(high); }
std::string reserved_key(int rank) { return "shm/reserved/" + std::to_string(rank); }
constexpr const char* kReserved = "reserved";

}  // namespace

SharedSegment::~SharedSegment() { ::munmap(base_, bytes_); }

// Nothing to clean up when the set-up fails: a segment has no name once made, and goes with the
// last descriptor and mapping of it.
SharedMemoryPairs::SharedMemoryPairs(Store& store, int rank, int size, const std::string& job_id,
                                     const std::vector<bool>& same_host, std::chrono::milliseconds timeout,
                                     const Fail& fail)
    : ends_(size) {
  set_up(store, rank, size, job_id, same_host, timeout, fail);
}

void SharedMemoryPairs::set_up(Store& store, int rank, int size, const std::string& job_id,
                               const std::vector<bool>& same_host, std::chrono::milliseconds timeout,
                               const Fail& fail) {
  // Ring 0 carries low -> high, ring 1 high -> low. The creator holds each segment's descriptor
  // until its peer has mapped it (the peer opens it through the creator's /proc path).
  std::vector<OwnedDescriptor> held(size);
  // A failure is told (`fail`) while `held` still keeps this rank's segments open: otherwise a
  // higher rank could find one gone first and name this (live) rank as dead.
  try {
    std::string shortage;  // why this rank could not reserve a segment
    for (int peer = rank + 1; peer < size && shortage.empty(); ++peer) {
      if (!same_host[peer]) continue;
      std::string name = "/comm-" + job_id.substr(0, 16) + "-" + std::to_string(::getpid()) + "-" +
                         std::to_string(rank) + "-" + std::to_string(peer);
      auto created = create_segment(name, kSegmentBytes);
      if (!created.problem.empty()) {
        shortage = created.problem;
        break;
      }
      auto segment = map_segment(created.file.get(), name);
      ends_[peer] = {segment, ring_at(segment->base(), 1), ring_at(segment->base(), 0)};
      held[peer] = std::move(created.file);
      store.set(pair_key(rank, peer), created.path);
    }
    // The host's pairs go over shared memory only if every rank on it could reserve its segments:
    // ranks that disagreed on the medium would disagree on the group's algorithms. Otherwise all
    // of them carry on over their TCP connections, and the lowest rank says why.
    std::vector<int> host_ranks;
    for (int peer = 0; peer < size; ++peer) {
      if (same_host[peer] || peer == rank) host_ranks.push_back(peer);
    }
    if (host_ranks.size() < 2) return;
    store.set(reserved_key(rank), shortage.empty() ? kReserved : shortage);
    for (int peer : host_ranks) {
      if (!shortage.empty()) break;
      if (peer != rank) {
        if (std::string said = store.get_string(reserved_key(peer)); said != kReserved) shortage = said;
      }
    }
    if (!shortage.empty()) {
      shortage_ = shortage;
      ends_.assign(ends_.size(), ShmPairEnd{});
      return;
    }
    for (int peer = 0; peer < rank; ++peer) {
      if (!same_host[peer]) continue;
      std::string path = store.get_string(pair_key(peer, rank));
      auto file = open_segment(path, kSegmentBytes);
      if (!file.valid()) {
        throw PeerClosedError("rank " + std::to_string(peer) +
                                  " died while the shared-memory pairs were being set up (the segment it made for "
                                  "rank " +
                                  std::to_string(rank) +
                                  " went with it); the other ranks stop here instead of waiting out the timeout",
                              ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"});
      }
      auto segment = map_segment(file.get(), path);
      ends_[peer] = {segment, ring_at(segment->base(), 0), ring_at(segment->base(), 1)};
      store.set(pair_key(peer, rank) + "/mapped", "1");
    }
    for (int peer = rank + 1; peer < size; ++peer) {
      if (!held[peer].valid()) continue;
      store.wait({pair_key(rank, peer) + "/mapped"}, timeout);
      held[peer].reset();
    }
  } catch (const Error& error) {
    if (fail) fail(error);
    throw;
  }
}

SharedMemoryPairs::~SharedMemoryPairs() = default;

ShmPairEnd SharedMemoryPairs::take(int peer) { return std::move(ends_[peer]); }

ShmStream::ShmStream(ShmPairEnd end, Socket doorbell, int peer, std::string peer_name, std::uint32_t first_sequence)
    : end_(std::move(end)),
      doorbell_(std::move(doorbell)),
      write_sequence_(first_sequence),
      read_sequence_(first_sequence),
      peer_(peer),
      peer_name_(std::move(peer_name)) {}

void ShmStream::ring_doorbell() {
  std::uint8_t byte = 1;
  if (::send(doorbell_.fd(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) {
    throw_peer_lost(peer_name_, peer_, "waking it", errno);
  }
}

namespace {

constexpr std::size_t kRecordAlign = 64;  // a record starts on its own cache line
// The reader gives the writer back room once it has read this much (see read_records).
constexpr std::size_t kReleaseBytes = kChunkBytes;
// Frames up to this size take write_some's one-record path.
constexpr std::size_t kSmallRecordBytes = 4096;

std::size_t record_bytes(std::size_t payload) { return (8 + payload + kRecordAlign - 1) & ~(kRecordAlign - 1); }

std::atomic_ref<std::uint64_t> record_header(const Ring& ring, std::uint64_t position) {
  return std::atomic_ref<std::uint64_t>(
      *reinterpret_cast<std::uint64_t*>(ring.data + (static_cast<std::size_t>(position) & (ring.capacity - 1))));
}

// Sequences count 1, 2, ... 2^32 - 1, 1, ...: never 0, the word of a cleared header slot (which
// the reader would otherwise take for an empty record once every 2^32 records, and lose the one
// written there next).
std::uint32_t next_sequence(std::uint32_t sequence) { return sequence == 0xFFFF'FFFF ? 1 : sequence + 1; }

std::uint64_t header_word(std::uint32_t sequence, std::uint32_t length) {
  return (std::uint64_t{sequence} << 32) | length;
}

}  // namespace

// The ring holds records: [u64 {sequence, length}][payload], each starting on a cache line. The
// reader polls the header word of the next record, whose sequence tells a new record from one
// left by the previous lap: one cache line carries both the signal and a small message, where
// a separate head index would cost another line per message.
std::size_t ShmStream::write_some(const iovec* vectors, int count) {
  Ring& ring = end_.outbound;
  if (count <= 2) {
    // A small frame (a header and its payload) that fits as one record where the writer
    // stands: copied and published without the general loop's bookkeeping (most messages).
    std::size_t first = vectors[0].iov_len, second = count == 2 ? vectors[1].iov_len : 0;
    std::size_t length = first + second;
    std::size_t offset = static_cast<std::size_t>(write_position_) & (ring.capacity - 1);
    std::size_t free = ring.capacity - static_cast<std::size_t>(write_position_ - known_tail_);
    if (length <= kSmallRecordBytes && free >= record_bytes(length) + kRecordAlign &&
        offset + 8 + length <= ring.capacity) {
      std::uint8_t* target = ring.data + offset + 8;
      std::memcpy(target, vectors[0].iov_base, first);
      if (second > 0) std::memcpy(target + first, vectors[1].iov_base, second);
      publish_record(length);
      wake_if_sleeping(ring.header->reader_sleeping);
      return length;
    }
  }
  std::size_t total = 0;
  for (int v = 0; v < count; ++v) total += vectors[v].iov_len;
  std::size_t written = 0;
  int vector = 0;
  std::size_t vector_offset = 0;
  while (written < total) {
    std::size_t offset = static_cast<std::size_t>(write_position_) & (ring.capacity - 1);
    std::size_t free = ring.capacity - static_cast<std::size_t>(write_position_ - known_tail_);
    std::size_t want = std::min(total - written, kChunkBytes);
    if (record_bytes(want) > free) {
      known_tail_ = ring.header->tail.load(std::memory_order_acquire);
      free = ring.capacity - static_cast<std::size_t>(write_position_ - known_tail_);
    }
    if (free < 2 * kRecordAlign) break;
    // Records never wrap: one that would is cut at the end of the ring (positions are multiples
    // of 64, so at least 56 bytes fit there). One line stays free for the next header slot.
    std::size_t length = std::min({want, free - kRecordAlign - 8, ring.capacity - offset - 8});
    std::uint8_t* target = ring.data + offset + 8;
    for (std::size_t copied = 0; copied < length;) {
      const auto* source = static_cast<const std::uint8_t*>(vectors[vector].iov_base) + vector_offset;
      std::size_t take = std::min(length - copied, vectors[vector].iov_len - vector_offset);
      std::memcpy(target + copied, source, take);
      copied += take;
      vector_offset += take;
      if (vector_offset == vectors[vector].iov_len) {
        ++vector;
        vector_offset = 0;
      }
    }
    publish_record(length);
    written += length;
  }
  if (written > 0) wake_if_sleeping(ring.header->reader_sleeping);
  return written;
}

void ShmStream::publish_record(std::size_t length) {
  Ring& ring = end_.outbound;
  // Clear the next record's header slot before publishing this one: whatever an earlier lap
  // left there (payload bytes, say) can then never be mistaken for a header.
  record_header(ring, write_position_ + record_bytes(length)).store(0, std::memory_order_relaxed);
  record_header(ring, write_position_)
      .store(header_word(write_sequence_, static_cast<std::uint32_t>(length)), std::memory_order_seq_cst);
  write_sequence_ = next_sequence(write_sequence_);
  write_position_ += record_bytes(length);
}

// True when the next record has been written; sets up reading it.
bool ShmStream::next_record_ready() {
  Ring& ring = end_.inbound;
  std::uint64_t word = record_header(ring, read_position_).load(std::memory_order_seq_cst);
  if (static_cast<std::uint32_t>(word >> 32) != read_sequence_) return false;
  record_left_ = static_cast<std::uint32_t>(word);
  record_offset_ = 8;
  return true;
}

std::size_t ShmStream::read_some(void* data, std::size_t bytes) {
  auto* target = static_cast<std::uint8_t*>(data);
  return read_records(bytes, [&](const std::uint8_t* run, std::size_t take, std::size_t read) {
    std::memcpy(target + read, run, take);
  });
}

std::size_t ShmStream::read_through(std::size_t bytes, RunSink& sink) {
  return read_records(bytes, [&](const std::uint8_t* run, std::size_t take, std::size_t) { sink(run, take); });
}

// Up to `bytes` from the records in the ring, each run handed to `use(run, bytes, offset)` before
// its record is released to the writer.
template <class Use>
std::size_t ShmStream::read_records(std::size_t bytes, Use&& use) {
  Ring& ring = end_.inbound;
  std::size_t read = 0;
  bool released = false;
  while (read < bytes) {
    if (!in_record_) {
      if (!next_record_ready()) {
        if (read == 0 && closed_error_ != 0) {
          throw_peer_lost(peer_name_, peer_, "waiting for it", closed_error_ < 0 ? 0 : closed_error_);
        }
        break;
      }
      in_record_ = true;
      record_length_ = record_left_;
    }
    std::size_t take = std::min(bytes - read, record_left_);
    std::size_t offset = static_cast<std::size_t>(read_position_) & (ring.capacity - 1);
    use(ring.data + offset + record_offset_, take, read);
    read += take;
    record_offset_ += take;
    record_left_ -= take;
    if (record_left_ == 0) {
      in_record_ = false;
      read_sequence_ = next_sequence(read_sequence_);
      read_position_ += record_bytes(record_length_);
      // Released to the writer in batches: a small message then costs the reader no atomic
      // write. The writer can only run out of room with more than the ring less one batch
      // unread, so a reader that reads on always releases in time.
      if (read_position_ - released_position_ >= kReleaseBytes) {
        ring.header->tail.store(read_position_, std::memory_order_seq_cst);
        released_position_ = read_position_;
        released = true;
      }
      // Stop at the record's end rather than look at the next header: when the writer is idle
      // that line sits modified in its cache, and reading it would put a cache miss on the
      // critical path of every small message. The caller asks again if it wants more.
      break;
    }
  }
  if (released) wake_if_sleeping(ring.header->writer_sleeping);
  return read;
}

// After publishing (a record, or room): the other side's progress thread may have gone to sleep
// counting on us. Our seq_cst store (of the record header or the tail) and this seq_cst load
// pair with prepare_to_sleep's store and load, Dekker-style, so one of us sees the other. (On
// x86 a seq_cst store is one xchg, cheaper than a release store plus an mfence.)
void ShmStream::wake_if_sleeping(std::atomic<std::uint32_t>& sleeping) {
  if (sleeping.load(std::memory_order_seq_cst) != 0 && sleeping.exchange(0) != 0) ring_doorbell();
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
  in.reader_sleeping.store(1, std::memory_order_seq_cst);  // pairs with write_some's publish
  if (in_record_ || next_record_ready()) {
    in.reader_sleeping.store(0, std::memory_order_relaxed);
    return false;
  }
  if (want_write) {
    RingHeader& out = *end_.outbound.header;
    out.writer_sleeping.store(1, std::memory_order_seq_cst);  // pairs with read_some's release
    known_tail_ = out.tail.load(std::memory_order_seq_cst);
    if (end_.outbound.capacity - static_cast<std::size_t>(write_position_ - known_tail_) >= 2 * kRecordAlign) {
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
