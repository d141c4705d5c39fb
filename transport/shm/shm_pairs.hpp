// Setting up the shared-memory rings between the ranks of a group that share a host.
//
// Each rank makes one receive segment holding a ring for each other rank on its host (the ring
// that rank writes and this one reads), so a host's shared memory grows with its number of
// ranks, not with the pairs among them: the segment stays within the rank's budget, each ring a
// power of two from 64 KiB to 4 MiB. The budget is COMM_SHM_BUDGET_MB where given; else 64 MiB,
// less where the host's rings would pass 512 MiB all together (default_shm_budget): large
// messages stream through a ring a quarter of it at a time and run as fast through 512 KiB as
// through 4 MiB, while every byte of every ring is zeroed at start-up and freed at the end
// (2.5 s of a 64-rank job's life on two cores at 64 MiB each). Segments are nameless
// from the moment they are made (transport/shm/shm_segment.hpp), so a rank killed at any point
// leaves nothing in /dev/shm; the creator keeps its descriptor while it lives, and the peers
// open the segment through its /proc path and map only their own ring of it.
//
// Through the store in O(ranks on the host) operations: every rank publishes its segment, the
// host's lowest rank gathers them into one entry, and every rank reads that one entry. A rank
// that could not reserve its segment (a full /dev/shm) says so in its place, and then every
// rank of the host talks over TCP instead: ranks that disagreed on the medium would disagree on
// the group's algorithms.
//
// `fail` runs on any error while this rank still holds its segment, and throws (publishing the
// cause to the other ranks, where the caller can): a rank's segment vanishes with its failure,
// so a peer that finds one gone must be able to learn this rank's cause instead of blaming it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "transport/shm/shm_stream.hpp"

namespace comm::transport {

inline constexpr std::size_t kDefaultShmBudgetBytes = std::size_t{64} << 20;
inline constexpr std::size_t kLargestRingBytes = std::size_t{4} << 20;
inline constexpr std::size_t kSmallestRingBytes = std::size_t{64} << 10;

inline constexpr std::size_t kHostRingsBytes = std::size_t{512} << 20;
// The budget of each of `ranks_on_host` ranks when the user gives none (see above), and at most
// half its share of what /dev/shm has free (`free_bytes`), so that a container's small /dev/shm
// (Docker's 64 MiB) still holds every rank's rings and the collectives' arena.
std::size_t default_shm_budget(std::size_t ranks_on_host, std::size_t free_bytes = ~std::size_t{0});

// The ring each of `peers` gets from `budget_bytes`: the largest power of two up to
// kLargestRingBytes whose `peers` copies fit the budget; 0 when that is below kSmallestRingBytes.
std::size_t ring_bytes_for(std::size_t budget_bytes, std::size_t peers);

class SharedMemoryPairs {
 public:
  using Fail = std::function<void(const Error&)>;
  SharedMemoryPairs(Store& store, int rank, int size, const std::string& job_id, const std::vector<bool>& same_host,
                    std::chrono::milliseconds timeout, const Fail& fail = {},
                    std::size_t budget_bytes = kDefaultShmBudgetBytes);
  SharedMemoryPairs(const SharedMemoryPairs&) = delete;
  SharedMemoryPairs& operator=(const SharedMemoryPairs&) = delete;
  ShmPairEnd take(int peer);
  // Whether the pair with `peer` runs over shared memory; it does not when some rank on this
  // host could not reserve its segment: then shortage() says why, and every pair on the host
  // falls back to its TCP connection.
  bool has(int peer) const { return !ends_[peer].mappings.empty(); }
  const std::string& shortage() const { return shortage_; }
  // The ring this rank reads from each peer (0 without shared memory).
  std::size_t ring_bytes() const { return ring_bytes_; }

 private:
  void set_up(Store& store, int rank, const std::string& job_id, const std::vector<bool>& same_host,
              std::chrono::milliseconds timeout, std::size_t budget_bytes);
  std::shared_ptr<SharedSegment> own_;  // this rank's receive segment
  std::vector<ShmPairEnd> ends_;
  std::string shortage_;
  std::size_t ring_bytes_ = 0;
};

}  // namespace comm::transport
