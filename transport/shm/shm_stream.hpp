// Shared memory between two ranks on one host: two single-producer, single-consumer byte rings
// (one per direction, each in its reader's receive segment), used as a ByteStream. The TCP socket the
// ranks already share stays open beside it, carrying only wake-ups (a byte sent when the other
// side's progress thread sleeps) and, by closing, the news that the peer died.
//
// Ring: a power-of-two data area of records (a header word with a sequence number and a length,
// then up to a quarter of the ring or 256 KiB of bytes), and the reader's tail on its own cache line. The writer
// publishes each record as soon as it is copied in, so the reader copies out while the writer is
// still copying in: large messages are pipelined through the ring, two copies per byte, no
// system call while both sides are awake.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/guarded_file.hpp"
#include "transport/medium.hpp"
#include "transport/socket.hpp"

namespace comm::transport {

struct alignas(64) RingHeader {
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes of the ring the reader has released
  alignas(64) std::atomic<std::uint32_t> reader_sleeping;
  alignas(64) std::atomic<std::uint32_t> writer_sleeping;
  LentSlots lent;  // the writer's leases (large messages in one copy: transport/lent_buffers.hpp)
};

// A mapped segment (or a slice of one); unmapped when the last ShmStream using it is destroyed.
class SharedSegment {
 public:
  // `keep_open`: the creator's descriptor of its own segment, through whose /proc path the
  // peers open it; it goes with the mapping (and with the process, if that dies first).
  SharedSegment(void* base, std::size_t bytes, OwnedDescriptor keep_open = OwnedDescriptor{})
      : base_(base), bytes_(bytes), keep_open_(std::move(keep_open)) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  std::uint8_t* base() const { return static_cast<std::uint8_t*>(base_); }

 private:
  void* base_;
  std::size_t bytes_;
  OwnedDescriptor keep_open_;
};

struct Ring {
  RingHeader* header = nullptr;
  std::uint8_t* data = nullptr;
  std::size_t capacity = 0;  // a power of two
};

// One rank's end of a pair: the ring it reads lies in its own receive segment, the ring it
// writes in its peer's (transport/shm/shm_pairs.hpp); the mappings they lie in live as long.
struct ShmPairEnd {
  std::vector<std::shared_ptr<SharedSegment>> mappings;
  Ring inbound, outbound;
  std::int64_t peer_pid = 0;  // the peer's process (its segment's /proc path says it); 0: unknown
};

class ShmStream final : public ByteStream {
 public:
  // `first_sequence`: of the first record each way (both ends alike; tests start near the wrap).
  // `single_copy`: lend large messages' buffers (false: every byte through the ring, COMM_SINGLE_COPY=0).
  ShmStream(ShmPairEnd end, Socket doorbell, int peer, std::string peer_name, std::uint32_t first_sequence = 1,
            bool single_copy = true);
  std::size_t write_some(const iovec* vectors, int count) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  // Hands the bytes over in the ring itself, record by record: no copy out first.
  bool reads_in_place() const override { return true; }
  std::size_t read_through(std::size_t bytes, RunSink& sink) override;
  std::optional<std::span<const std::uint8_t>> lend_record() override;
  void release_record() override;
  int wakeup_fd() const override { return doorbell_.fd(); }
  void on_wakeup() override;
  bool prepare_to_sleep(bool want_write) override;
  void woke_up() override;
  bool writes_wake_through_fd() const override { return false; }
  bool shares_host_memory() const override { return true; }
  LentBuffers* lent_buffers() override { return single_copy_ ? &lent_ : nullptr; }
  const char* medium() const override { return "shm"; }

 private:
  void ring_doorbell();
  // Publishes the record of `length` bytes copied in at the write position, and moves past it.
  void publish_record(std::size_t length);
  void clear_ahead();
  void wake_if_sleeping(std::atomic<std::uint32_t>& sleeping);
  bool next_record_ready();
  template <class Use>
  std::size_t read_records(std::size_t bytes, Use&& use);
  // Moves past the record being read (of `length` bytes); true when room went back to the writer.
  bool finish_record(std::size_t length);
  ShmPairEnd end_;
  Socket doorbell_;
  std::size_t write_chunk_;    // the most one record carries
  std::size_t release_bytes_;  // the reader gives the writer back room in batches of this much
  // How far each ring's pages are faulted into this process (map_ahead), on the first lap.
  std::uint64_t outbound_mapped_ = 0, inbound_mapped_ = 0;
  int closed_error_ = 0;  // the doorbell socket ended: -1 end of file, else errno
  // Writer side (outbound ring).
  std::uint64_t write_position_ = 0;
  std::uint32_t write_sequence_;
  std::uint64_t known_tail_ = 0;  // the reader's tail when last read (only ever behind)
  // Every line's header slot in [write_position_ + one line, cleared_until_) is clear; the slot
  // at write_position_ itself was cleared before the record before it was published.
  std::uint64_t cleared_until_ = 0;
  // Reader side (inbound ring).
  std::uint64_t read_position_ = 0;
  std::uint32_t read_sequence_;
  std::uint64_t released_position_ = 0;  // the tail this side last published
  bool in_record_ = false;
  std::size_t record_length_ = 0, record_left_ = 0, record_offset_ = 0;
  int peer_;
  std::string peer_name_;
  LentBuffers lent_;
  bool single_copy_;
};

}  // namespace comm::transport
