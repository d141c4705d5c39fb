#include "algorithms/tuner.hpp"

#include <atomic>
#include <bit>
#include <string>
#include <utility>

#include "libcomm/base/check.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"

namespace comm::algorithms {
namespace {

// COMM_ALGO, read once.
Algorithm environment_algorithm() {
  static const Algorithm value = [] {
    auto name = environment::get("COMM_ALGO");
    return name ? parse_algorithm(*name, "COMM_ALGO") : Algorithm::Auto;
  }();
  return value;
}

// Crossovers measured with the *_perf benches on the 2-core development VM (see
// docs/results/collectives.md): below them the log(n)-round algorithms win on latency.
constexpr std::size_t kAllReduceRingFrom = 1024 * 1024;
// Ranks sharing a host: from 3 ranks the shared-memory all_reduce at every size (its work per
// rank does not grow with the number of ranks: 4 ranks on 2 cores reach 3.1-3.4 GB/s busbw at
// 8-128 MiB, the ring 0.8-1.3). On 2 ranks it wins small messages (8 bytes 0.2 us, recursive
// doubling 0.45; up to 8 KiB) and large ones (from 4 MiB), while the ring, where each rank
// reduces half as it arrives from the peer's ring buffer, wins in between (256 KiB 8.5-9.7 GB/s
// against 5.3-6.2; 1 MiB 14-15 against 10 in fast stretches). From 4 MiB the two trade places
// run to run (16 MiB: ring 1.9-7.0, shared memory 1.4-6.5), and in side-by-side runs the ring
// fell to 2.2-2.6 GB/s where shared memory had held 5.1-6.4: shared memory keeps them.
// docs/results/collectives.md has the runs.
constexpr std::size_t kSharedMemoryTwoRanksUpTo = 8 * 1024;
constexpr std::size_t kSharedMemoryTwoRanksFrom = 4 * 1024 * 1024;
// Across hosts with several ranks on each (hierarchical.hpp): measured on two network namespaces
// x 2 ranks joined by a tc-limited veth (docs/results/multihost.md), the hierarchy beat the flat
// ring at every size from 4 MiB at 5 Gbit/s (64 MiB: 170 against 215 ms) but only from 16-64 MiB
// at 1 Gbit/s (4 MiB: 64 against 55 ms). Until the tuner reads the link, it starts at 8 MiB.
constexpr std::size_t kHierarchicalFrom = 8 * 1024 * 1024;
// Where each host holds a consecutive power-of-two block of ranks, recursive halving-doubling
// (halving_doubling.hpp) beat both on the same links up to 16 MiB in two runs: 1 Gbit/s 4 MiB
// 36-37 ms against the hierarchy's 59-60 and Gloo's 47-50, 16 MiB 150-153 against 194-204 and
// 188-189; 5 Gbit/s 4 MiB 9.1-9.2 against 12-13 and 12-13. At 64 MiB it won on 5 Gbit/s (175-176
// against 188-191) but on 1 Gbit/s took 706 and 797 ms against the hierarchy's 696 and 702: its
// halves go as single messages, which a slow, shallow link queue punishes, where the hierarchy's
// ring pipelines chunks. Until the tuner reads the link it takes over from recursive doubling for
// such groups up to 32 MiB, and the hierarchy above.
constexpr std::size_t kHalvingDoublingUpTo = 32 * 1024 * 1024;
constexpr std::size_t kBroadcastRingFrom = 64 * 1024;
constexpr std::size_t kReduceRingFrom = 64 * 1024;

Algorithm by_default(const TunerQuery& query) {
  switch (query.collective) {
    case Collective::AllReduce:
      if (query.shared_memory && query.size > 1) {
        bool two_ranks_ring =
            query.size == 2 && query.bytes > kSharedMemoryTwoRanksUpTo && query.bytes < kSharedMemoryTwoRanksFrom;
        return two_ranks_ring ? Algorithm::Ring : Algorithm::SharedMemory;
      }
      if (query.bytes < kAllReduceRingFrom) return Algorithm::RecursiveDoubling;
      if (query.contiguous_hosts && query.bytes < kHalvingDoublingUpTo) return Algorithm::HalvingDoubling;
      return query.hierarchical && query.bytes >= kHierarchicalFrom ? Algorithm::Hierarchical : Algorithm::Ring;
    case Collective::Broadcast: return query.bytes < kBroadcastRingFrom ? Algorithm::Tree : Algorithm::Ring;
    case Collective::Reduce: return query.bytes < kReduceRingFrom ? Algorithm::Tree : Algorithm::Ring;
    case Collective::AllGather:
    case Collective::ReduceScatter:
      // bytes is one rank's block: the call moves size() of them.
      return query.hierarchical && query.bytes * static_cast<std::size_t>(query.size) >= kHierarchicalFrom
                 ? Algorithm::Hierarchical
                 : Algorithm::Ring;
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::AllToAll: return Algorithm::Direct;
    case Collective::Barrier:
      return query.shared_memory && query.size > 1 ? Algorithm::SharedMemory : Algorithm::Dissemination;
  }
  return Algorithm::Ring;
}

// Runs on every call, so it costs a load when the choice was logged already: one bit per
// (collective, size class), size classes being bit widths 0..64.
void log_once(const TunerQuery& query, Algorithm algorithm, const char* why) {
  constexpr int kCollectives = static_cast<int>(Collective::Barrier) + 1;
  static std::atomic<std::uint64_t> seen[kCollectives][2];
  int size_class = static_cast<int>(std::bit_width(query.bytes));
  auto& word = seen[static_cast<int>(query.collective)][size_class / 64];
  std::uint64_t bit = std::uint64_t{1} << (size_class % 64);
  if ((word.load(std::memory_order_relaxed) & bit) != 0 || (word.fetch_or(bit) & bit) != 0) return;
  log::get(log::Subsystem::Algorithms)
      .info("{} of {} bytes on {} ranks: {} ({})", to_string(query.collective), query.bytes, query.size,
            to_string(algorithm), why);
}

}  // namespace

bool has_algorithm(Collective collective, Algorithm algorithm) {
  switch (collective) {
    case Collective::AllReduce:
      return algorithm == Algorithm::Ring || algorithm == Algorithm::Tree ||
             algorithm == Algorithm::RecursiveDoubling || algorithm == Algorithm::SharedMemory ||
             algorithm == Algorithm::Hierarchical || algorithm == Algorithm::HalvingDoubling;
    case Collective::Broadcast:
    case Collective::Reduce: return algorithm == Algorithm::Ring || algorithm == Algorithm::Tree;
    case Collective::AllGather:
    case Collective::ReduceScatter: return algorithm == Algorithm::Ring || algorithm == Algorithm::Hierarchical;
    case Collective::Gather:
    case Collective::Scatter:
    case Collective::AllToAll: return algorithm == Algorithm::Direct;
    case Collective::Barrier: return algorithm == Algorithm::Dissemination || algorithm == Algorithm::SharedMemory;
  }
  return false;
}

Algorithm choose(const TunerQuery& query) {
  if (query.requested != Algorithm::Auto) {
    COMM_CHECK(has_algorithm(query.collective, query.requested), InvalidArgumentError,
               (ErrorContext{.rank = query.rank, .op = to_string(query.collective)}),
               std::string(to_string(query.collective)) + " has no " + to_string(query.requested) +
                   " algorithm; pass Algorithm::Auto or one the collective has (docs/collectives.md lists them)");
    COMM_CHECK(query.requested != Algorithm::SharedMemory || query.shared_memory, InvalidArgumentError,
               (ErrorContext{.rank = query.rank, .op = to_string(query.collective)}),
               std::string(to_string(query.collective)) +
                   " with shared_memory needs every rank of the group on one "
                   "host over shared memory; pass Algorithm::Auto or another algorithm");
    COMM_CHECK(query.requested != Algorithm::Hierarchical || query.hierarchical, InvalidArgumentError,
               (ErrorContext{.rank = query.rank, .op = to_string(query.collective)}),
               std::string(to_string(query.collective)) +
                   " with hierarchical needs the group on several hosts with the same number (more than one) of "
                   "its ranks on each; pass Algorithm::Auto or another algorithm");
    return query.requested;
  }
  Algorithm forced = environment_algorithm();
  if (forced != Algorithm::Auto && has_algorithm(query.collective, forced) &&
      (forced != Algorithm::SharedMemory || query.shared_memory) &&
      (forced != Algorithm::Hierarchical || query.hierarchical)) {
    log_once(query, forced, "COMM_ALGO");
    return forced;
  }
  Algorithm algorithm = by_default(query);
  log_once(query, algorithm, "tuned");
  return algorithm;
}

void read_environment() {
  environment_algorithm();
  ring_chunk_bytes();
}

std::size_t ring_chunk_bytes() {
  static const std::size_t value = [] {
    // Below 4 KiB a chunk costs more in messages than it moves (1 byte: a 1 MiB all_reduce took 2.5 s).
    auto bytes = environment::get_integer_in("COMM_RING_CHUNK", 4096, std::int64_t{1} << 30,
                                             "bytes per pipelining chunk of the ring algorithms");
    return bytes ? static_cast<std::size_t>(*bytes) : std::size_t{2} << 20;
  }();
  return value;
}

}  // namespace comm::algorithms
