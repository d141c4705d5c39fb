// Scratch memory of a group's collectives, kept between calls: a large collective would
// otherwise allocate (and the kernel zero and fault in) tens of megabytes per call. Memory is
// handed out uninitialized, per slot, and stays valid until the next request for that slot;
// a group runs one collective at a time, so slots are never shared between calls in flight.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace comm::algorithms {

class ScratchPool {
 public:
  static constexpr int kSlots = 3;

  std::uint8_t* get(int slot, std::size_t bytes) {
    Slot& held = slots_.at(static_cast<std::size_t>(slot));
    if (held.bytes < bytes) {
      held.data.reset();  // free first: two large buffers at once could exhaust memory
      held.data = std::make_unique_for_overwrite<std::uint8_t[]>(bytes);
      held.bytes = bytes;
    }
    return held.data.get();
  }

 private:
  struct Slot {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t bytes = 0;
  };
  std::array<Slot, kSlots> slots_{};
};

}  // namespace comm::algorithms
