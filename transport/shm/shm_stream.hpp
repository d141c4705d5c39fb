// Shared memory between two ranks on one host: a segment holding two single-producer,
// single-consumer byte rings (one per direction), used as a ByteStream. The TCP socket the
// ranks already share stays open beside it, carrying only wake-ups (a byte sent when the other
// side's progress thread sleeps) and, by closing, the news that the peer died.
//
// Ring: head (bytes ever written) and tail (bytes ever read), each on its own cache line, and
// a power-of-two data area. The writer publishes head after each chunk it copies in, so the
// reader copies out while the writer is still copying in: large messages are pipelined through
// the ring, two copies per byte, no system call while both sides are awake.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.hpp"
#include "socket.hpp"
#include "stream_connection.hpp"

namespace comm::transport {

struct alignas(64) RingHeader {
  alignas(64) std::atomic<std::uint64_t> head;
  alignas(64) std::atomic<std::uint64_t> tail;
  alignas(64) std::atomic<std::uint32_t> reader_sleeping;
  alignas(64) std::atomic<std::uint32_t> writer_sleeping;
};

// A mapped segment; unmapped when the last ShmStream using it is destroyed.
class SharedSegment {
 public:
  SharedSegment(void* base, std::size_t bytes) : base_(base), bytes_(bytes) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  std::uint8_t* base() const { return static_cast<std::uint8_t*>(base_); }

 private:
  void* base_;
  std::size_t bytes_;
};

struct Ring {
  RingHeader* header = nullptr;
  std::uint8_t* data = nullptr;
  std::size_t capacity = 0;  // a power of two
};

struct ShmPairEnd {
  std::shared_ptr<SharedSegment> segment;
  Ring inbound, outbound;
};

// Creates, maps and unlinks the segments of every same-host pair of a group. The lower rank
// of a pair creates its segment and unlinks it as soon as the higher rank says it has mapped
// it, so a crash leaves nothing in /dev/shm after set-up; whatever is still linked when this
// object dies (a failed set-up) is unlinked then.
class SharedMemoryPairs {
 public:
  SharedMemoryPairs(Store& store, int rank, int size, const std::string& job_token, const std::vector<bool>& same_host,
                    std::chrono::milliseconds timeout);
  ~SharedMemoryPairs();
  SharedMemoryPairs(const SharedMemoryPairs&) = delete;
  SharedMemoryPairs& operator=(const SharedMemoryPairs&) = delete;
  ShmPairEnd take(int peer);

 private:
  std::vector<ShmPairEnd> ends_;
  std::vector<std::string> linked_;  // names still to unlink
};

class ShmStream final : public ByteStream {
 public:
  ShmStream(ShmPairEnd end, Socket doorbell, int peer, std::string peer_name);
  std::size_t write_some(const iovec* vectors, int count) override;
  std::size_t read_some(void* data, std::size_t bytes) override;
  int wakeup_fd() const override { return doorbell_.fd(); }
  void on_wakeup() override;
  bool prepare_to_sleep(bool want_write) override;
  void woke_up() override;
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "shm"; }

 private:
  void ring_doorbell();
  ShmPairEnd end_;
  Socket doorbell_;
  int closed_error_ = 0;
  std::uint64_t known_tail_ = 0;  // the reader's tail when last read (only ever behind)  // the doorbell socket ended: -1 end of file, else errno
  int peer_;
  std::string peer_name_;
};

}  // namespace comm::transport
