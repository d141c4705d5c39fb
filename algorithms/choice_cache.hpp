// The tuner's last answer for each collective of a group, so that a program calling the same
// collective at the same size again (the common case: a training step, a benchmark loop) skips
// the tuner and the algorithm table. A group's answer depends only on the collective, the size
// and the algorithm asked for: the environment is read once, and the link's model is set
// before a program's first call (read_link clears the cache).
//
// Lock-free, since calls may come from several threads: each slot is a sequence lock whose
// fields are atomics, so a reader racing a writer sees a miss, never a torn answer.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/tuner.hpp"

namespace comm::algorithms {

class ChoiceCache {
 public:
  struct Answer {
    Choice choice;
    const AlgorithmEntry* entry = nullptr;  // the chosen algorithm's row of the table
  };

  std::optional<Answer> find(Collective collective, std::size_t bytes, Algorithm requested) const {
    const Slot& slot = slots_[static_cast<std::size_t>(collective)];
    std::uint32_t version = slot.version.load(std::memory_order_acquire);
    if (version & 1u) return std::nullopt;  // being written
    std::size_t cached_bytes = slot.bytes.load(std::memory_order_relaxed);
    std::uint64_t algorithms = slot.algorithms.load(std::memory_order_relaxed);
    Answer answer{
        {static_cast<Algorithm>((algorithms >> 8) & 0xFF), slot.chunk_bytes.load(std::memory_order_relaxed),
         slot.link_chunk_bytes.load(std::memory_order_relaxed), static_cast<Algorithm>((algorithms >> 16) & 0xFF)},
        slot.entry.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.version.load(std::memory_order_relaxed) != version) return std::nullopt;
    if (cached_bytes != bytes || static_cast<Algorithm>(algorithms & 0xFF) != requested || answer.entry == nullptr)
      return std::nullopt;
    return answer;
  }

  // Keeps `answer` unless another thread is storing into the same slot (false: then the next
  // call stores it).
  bool store(Collective collective, std::size_t bytes, Algorithm requested, const Answer& answer) {
    Slot& slot = slots_[static_cast<std::size_t>(collective)];
    std::uint32_t version = slot.version.load(std::memory_order_relaxed);
    if ((version & 1u) || !slot.version.compare_exchange_strong(version, version + 1, std::memory_order_acquire))
      return false;
    std::atomic_thread_fence(std::memory_order_release);
    slot.bytes.store(bytes, std::memory_order_relaxed);
    slot.algorithms.store(static_cast<std::uint64_t>(requested) |
                              (static_cast<std::uint64_t>(answer.choice.algorithm) << 8) |
                              (static_cast<std::uint64_t>(answer.choice.across_hosts) << 16),
                          std::memory_order_relaxed);
    slot.chunk_bytes.store(answer.choice.chunk_bytes, std::memory_order_relaxed);
    slot.link_chunk_bytes.store(answer.choice.link_chunk_bytes, std::memory_order_relaxed);
    slot.entry.store(answer.entry, std::memory_order_relaxed);
    slot.version.store(version + 2, std::memory_order_release);
    return true;
  }

  // Forgets every answer (a null entry is never a hit), waiting out a store in flight so
  // that no answer from before survives it.
  void clear() {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      while (!store(static_cast<Collective>(i), 0, Algorithm::Auto, Answer{})) {
      }
    }
  }

 private:
  struct Slot {
    std::atomic<std::uint32_t> version{0};  // odd while written
    std::atomic<std::size_t> bytes{0};
    std::atomic<std::uint64_t> algorithms{0};  // requested, chosen, across hosts: a byte each
    std::atomic<std::size_t> chunk_bytes{0};
    std::atomic<std::size_t> link_chunk_bytes{0};
    std::atomic<const AlgorithmEntry*> entry{nullptr};
  };
  std::array<Slot, static_cast<std::size_t>(Collective::Barrier) + 1> slots_{};
};

}  // namespace comm::algorithms
