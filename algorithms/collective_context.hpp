// What every collective algorithm works with: the group's transport, its place in the group,
// a tag range of its own, and the time it may wait. Algorithms are rank arithmetic plus
// transfers through this context; they never see sockets, shared memory or CUDA.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "completion.hpp"
#include "transport.hpp"

namespace comm::algorithms {

// Collectives use tags with the top bit set, so they never meet user point-to-point tags
// (ints >= 0). Each collective call gets its own block of 2^16 tags from its sequence number.
constexpr std::uint64_t kCollectiveTagBit = std::uint64_t{1} << 63;

struct CollectiveContext {
  transport::Transport& transport;
  int rank;
  int size;
  std::uint64_t sequence;  // the call's number in its group, identical on every rank
  std::chrono::milliseconds timeout;
  const char* op;          // "all_reduce", for errors

  std::uint64_t tag(std::uint64_t step) const { return kCollectiveTagBit | (sequence << 16) | (step & 0xFFFF); }
  // Waits for a transfer of this collective; a timeout names the peer and the step.
  void wait(const std::shared_ptr<detail::Completion>& transfer, int peer, std::uint64_t step) const;
};

}  // namespace comm::algorithms
