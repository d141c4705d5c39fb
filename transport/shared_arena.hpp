// One shared-memory segment that every rank of a group maps, when the whole group lives on one
// host: per rank a control line (flags only that rank writes) and data slots, twice over so
// that consecutive pieces of a collective alternate between two buffers. Collectives written
// over it (algorithms/shared_memory.*) move each byte through memory once per rank instead of
// once per ring hop, and synchronise with one cache line per rank instead of a message.
//
// Algorithms get one from Transport::map_shared_arena() (transport.hpp), which only a transport
// whose every peer shares this host over shared memory can give; the shm medium makes it
// (transport/shm/shared_arena.cpp), collectively through the store: the group's first rank
// creates the segment and unlinks it as soon as every rank has mapped it, so a crash leaves
// nothing in /dev/shm after set-up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace comm::transport {

class SharedArena {
 public:
  // The flags one rank publishes; epochs only grow (0: nothing yet).
  struct alignas(64) Control {
    std::atomic<std::uint64_t> arrived{0};  // its input for this epoch is in its slot
    std::atomic<std::uint64_t> reduced{0};  // its part of the shared result is written
    // The call it is in (detail::fingerprint), per buffer, set before arriving: a peer may be one
    // piece ahead, on the other buffer, but never two.
    std::atomic<std::uint64_t> fingerprint[2]{};
    std::atomic<std::uint64_t> sequence[2]{};  // the call's number in the group, likewise
  };

  // Takes over a mapping of the layout above (the shm medium makes one).
  SharedArena(void* base, std::size_t bytes, int size, std::size_t slot_bytes);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  static constexpr std::size_t kSlotBytes = 256 * 1024;  // one piece of a host collective
  // COMM_SHM_SLOT_BYTES's range: whole pages, so that every dtype's elements fit evenly.
  static constexpr std::size_t kMinSlotBytes = 4096;
  static constexpr std::size_t kMaxSlotBytes = 64 * 1024 * 1024;
  int size() const { return size_; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  // The whole mapping (e.g. to register it with CUDA for DMA).
  void* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  Control& control(int rank) const { return controls_[rank]; }
  // Rank `rank`'s input slot, and the shared result area, of buffer 0 or 1.
  std::uint8_t* slot(int buffer, int rank) const {
    return data_ +
           (static_cast<std::size_t>(buffer) * static_cast<std::size_t>(size_ + 1) + static_cast<std::size_t>(rank)) *
               slot_bytes_;
  }
  std::uint8_t* result(int buffer) const { return slot(buffer, size_); }
  // Numbers the pieces every rank goes through, identically everywhere.
  std::uint64_t next_epoch() { return ++epoch_; }

 private:
  void* base_;
  std::size_t bytes_;
  int size_;
  std::size_t slot_bytes_;
  Control* controls_;
  std::uint8_t* data_;
  std::uint64_t epoch_ = 0;
};

}  // namespace comm::transport
