#include "transport/shm/shm_stream.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "comm/error.hpp"
#include "libcomm/base/short_copy.hpp"
#include "transport/medium.hpp"

namespace comm::transport {
namespace {

// The writer publishes (and the reader releases) after at most this much, so the two copies
// of a large message overlap; a smaller ring uses a quarter of itself.
constexpr std::size_t kChunkBytes = 256 * 1024;
constexpr std::uint64_t kAllMapped = ~std::uint64_t{0};

// Faults [from, to) of the ring into this process. Its pages are reserved (allocated) when the
// segment is made, but mapping every ring of every peer at init cost 3 s of a 64-rank start on
// two cores (and the goodbyes at the end as much again), while faulting them one by one cost
// microseconds per small message on the first pass. So each side maps its ring in a chunk at a
// time, ahead of where it writes or reads, on the first lap only.
void map_in(const Ring& ring, std::size_t from, std::size_t to) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels say EINVAL and take the loop below
#endif
  if (::madvise(ring.data + from, to - from, MADV_POPULATE_WRITE) == 0) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (std::size_t offset = from; offset < to; offset += page) {
    // A shared mapping of tmpfs: a read fault maps the page writable.
    static_cast<void>(*static_cast<volatile std::uint8_t*>(ring.data + offset));
  }
}

// Maps the ring in up to `upto` (a position of the first lap), a chunk at a time; `mapped`
// becomes "everything" once the whole ring is in.
void map_ahead(const Ring& ring, std::uint64_t& mapped, std::uint64_t upto) {
  std::size_t end =
      std::min(ring.capacity, (static_cast<std::size_t>(upto) + kChunkBytes - 1) / kChunkBytes * kChunkBytes);
  if (end > mapped) map_in(ring, static_cast<std::size_t>(mapped), end);
  mapped = end == ring.capacity ? kAllMapped : end;
}

}  // namespace

ShmStream::ShmStream(ShmPairEnd end, Socket doorbell, int peer, std::string peer_name, std::uint32_t first_sequence,
                     bool single_copy)
    : end_(std::move(end)),
      doorbell_(std::move(doorbell)),
      write_chunk_(std::min(kChunkBytes, end_.outbound.capacity / 4)),
      release_bytes_(std::min(kChunkBytes, end_.inbound.capacity / 4)),
      write_sequence_(first_sequence),
      read_sequence_(first_sequence),
      peer_(peer),
      peer_name_(std::move(peer_name)),
      lent_(&end_.outbound.header->lent, &end_.inbound.header->lent, read_other_process, end_.peer_pid),
      single_copy_(single_copy) {}

void ShmStream::ring_doorbell() {
  std::uint8_t byte = 1;
  if (::send(doorbell_.fd(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) {
    throw_peer_lost(peer_name_, peer_, "waking it", errno);
  }
}

namespace {

constexpr std::size_t kRecordAlign = 64;  // a record starts on its own cache line
// How far ahead of the write position header slots are cleared (clear_ahead).
constexpr std::uint64_t kClearAheadBytes = 1024;
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
  // Room for the largest record this call writes, and the next header slot.
  if (write_position_ + kChunkBytes + 2 * kRecordAlign > outbound_mapped_) [[unlikely]] {
    map_ahead(ring, outbound_mapped_, write_position_ + kChunkBytes + 2 * kRecordAlign);
  }
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
      detail::copy_short(target, vectors[0].iov_base, first);
      if (second > 0) detail::copy_short(target + first, vectors[1].iov_base, second);
      publish_record(length);
      wake_if_sleeping(ring.header->reader_sleeping);
      // Half the distance left: a batch of lines cleared every few messages, not one per call.
      if (cleared_until_ < write_position_ + kClearAheadBytes / 2) clear_ahead();
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
    std::size_t want = std::min(total - written, write_chunk_);
    // Room for the record and the next header slot, as checked below: a stale tail that left
    // exactly one line (free == one record of one line) stalled the writer until the progress
    // thread's next sleep looked again.
    if (record_bytes(want) + kRecordAlign > free) {
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
  if (written > 0) {
    wake_if_sleeping(ring.header->reader_sleeping);
    clear_ahead();
  }
  return written;
}

// Inline into write_some: every message passes here.
[[gnu::always_inline]] inline void ShmStream::publish_record(std::size_t length) {
  Ring& ring = end_.outbound;
  // The next record's header slot must be clear before this one is published: whatever an
  // earlier lap left there (payload bytes, say) could otherwise be mistaken for a header. It
  // was cleared ahead (clear_ahead) unless this record reaches past what was.
  std::uint64_t next = write_position_ + record_bytes(length);
  if (next >= cleared_until_) [[unlikely]] {
    record_header(ring, next).store(0, std::memory_order_relaxed);
    cleared_until_ = next + kRecordAlign;
  }
  record_header(ring, write_position_)
      .store(header_word(write_sequence_, static_cast<std::uint32_t>(length)), std::memory_order_seq_cst);
  write_sequence_ = next_sequence(write_sequence_);
  write_position_ = next;
}

// Clears the header slot of every line a little ahead of the write position, after a publish.
// Those lines were last written a lap ago and are cold in this core's cache: clearing the next
// slot just before the publish put that miss on every small message's path (the publish's
// seq_cst store waits for the stores before it), where now it is taken off it, a few messages
// early. Only lines the reader has released (before known_tail_ + capacity) are touched, and
// the reader reads no slot past the write position.
void ShmStream::clear_ahead() {
  Ring& ring = end_.outbound;
  std::uint64_t until = std::min({write_position_ + kClearAheadBytes, known_tail_ + ring.capacity, outbound_mapped_});
  for (std::uint64_t position = std::max(cleared_until_, write_position_ + kRecordAlign); position < until;
       position += kRecordAlign) {
    record_header(ring, position).store(0, std::memory_order_relaxed);
    cleared_until_ = position + kRecordAlign;
  }
}

// True when the next record has been written; sets up reading it (its pages mapped in, on the
// first lap).
bool ShmStream::next_record_ready() {
  Ring& ring = end_.inbound;
  std::uint64_t word = record_header(ring, read_position_).load(std::memory_order_seq_cst);
  if (static_cast<std::uint32_t>(word >> 32) != read_sequence_) return false;
  record_left_ = static_cast<std::uint32_t>(word);
  record_offset_ = 8;
  if (read_position_ + record_bytes(record_left_) > inbound_mapped_) [[unlikely]] {
    map_ahead(ring, inbound_mapped_, read_position_ + record_bytes(record_left_));
  }
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
      released = finish_record(record_length_);
      // Stop at the record's end rather than look at the next header: when the writer is idle
      // that line sits modified in its cache, and reading it would put a cache miss on the
      // critical path of every small message. The caller asks again if it wants more.
      break;
    }
  }
  if (released) wake_if_sleeping(ring.header->writer_sleeping);
  return read;
}

bool ShmStream::finish_record(std::size_t length) {
  read_sequence_ = next_sequence(read_sequence_);
  read_position_ += record_bytes(length);
  // Released to the writer in batches: a small message then costs the reader no atomic write.
  // The writer can only run out of room with more than the ring less one batch unread, so a
  // reader that reads on always releases in time.
  if (read_position_ - released_position_ < release_bytes_) return false;
  end_.inbound.header->tail.store(read_position_, std::memory_order_seq_cst);
  released_position_ = read_position_;
  return true;
}

std::optional<std::span<const std::uint8_t>> ShmStream::lend_record() {
  if (in_record_) return std::nullopt;
  if (!next_record_ready()) {
    if (closed_error_ != 0) throw_peer_lost(peer_name_, peer_, "waiting for it", closed_error_ < 0 ? 0 : closed_error_);
    return std::span<const std::uint8_t>{};
  }
  Ring& ring = end_.inbound;
  std::size_t offset = static_cast<std::size_t>(read_position_) & (ring.capacity - 1);
  return std::span<const std::uint8_t>{ring.data + offset + 8, record_left_};
}

// After lend_record: the record it lent (record_left_ still holds its length).
void ShmStream::release_record() {
  if (finish_record(record_left_)) wake_if_sleeping(end_.inbound.header->writer_sleeping);
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
