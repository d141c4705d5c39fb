#include "algorithms/tuner.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <optional>
#include <string>
#include <utility>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/cost_model.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/collective_traits.hpp"
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
constexpr std::size_t kBroadcastRingFrom = 64 * 1024;
constexpr std::size_t kReduceRingFrom = 64 * 1024;
// Below these, broadcast and reduce run algorithms in which every rank hears every rank: the
// others end with a confirmation (algorithm_table.hpp, Hearing), which costs what they save.
// Side by side on the 2-core VM (docs/results/collectives.md): dissemination broadcast 1.2-1.4
// us against the tree's 1.9-2.4 (2 ranks, shm, 8 B), 148-161 against 154-194 (4 ranks, tcp),
// and no slower up to 32 KiB; recursive doubling reduce wins below 4 KiB (2 ranks, shm, 8 B:
// 1.4-1.7 us against 1.9-2.2) and loses at 32 KiB (19-20 against 16-19), where its log2(n)
// whole-buffer reductions show.
constexpr std::size_t kReduceRecursiveDoublingBelow = 4 * 1024;
// The crossovers above are for one host; across hosts the cost model of the measured link
// decides (cost_model.hpp), the hierarchy winning where it is predicted within this factor of
// the best (see choose()).
constexpr double kHierarchyMargin = 1.05;

Algorithm by_default(const TunerQuery& query) {
  switch (query.collective) {
    case Collective::AllReduce:
      if (query.shared_memory && query.size > 1) {
        bool two_ranks_ring =
            query.size == 2 && query.bytes > kSharedMemoryTwoRanksUpTo && query.bytes < kSharedMemoryTwoRanksFrom;
        return two_ranks_ring ? Algorithm::Ring : Algorithm::SharedMemory;
      }
      return query.bytes < kAllReduceRingFrom ? Algorithm::RecursiveDoubling : Algorithm::Ring;
    case Collective::Broadcast: return query.bytes < kBroadcastRingFrom ? Algorithm::Dissemination : Algorithm::Ring;
    case Collective::Reduce:
      if (query.bytes < kReduceRecursiveDoublingBelow) return Algorithm::RecursiveDoubling;
      return query.bytes < kReduceRingFrom ? Algorithm::Tree : Algorithm::Ring;
    case Collective::Barrier:
      return query.shared_memory && query.size > 1 ? Algorithm::SharedMemory : Algorithm::Dissemination;
    default:
      // The rest run their row's algorithm (collective_traits.hpp) whatever the size. all_to_all_v's
      // counts differ by rank, so its choice may not depend on size (ranks would disagree):
      // Bruck's (fewer messages for many ranks) only by name.
      return traits_of(query.collective).default_algorithm;
  }
}

// Runs on every call, so it costs a load when the choice was logged already: one bit per
// (collective, size class), size classes being bit widths 0..64. `why` makes the reason, only
// when it is logged.
template <class Why>
void log_once(const TunerQuery& query, Algorithm algorithm, Why why) {
  constexpr int kCollectives = static_cast<int>(Collective::Barrier) + 1;
  static std::atomic<std::uint64_t> seen[kCollectives][2];
  int size_class = static_cast<int>(std::bit_width(query.bytes));
  auto& word = seen[static_cast<int>(query.collective)][size_class / 64];
  std::uint64_t bit = std::uint64_t{1} << (size_class % 64);
  if ((word.load(std::memory_order_relaxed) & bit) != 0 || (word.fetch_or(bit) & bit) != 0) return;
  auto& logger = log::get(log::Subsystem::Algorithms);
  if (!logger.should_log(spdlog::level::info)) return;
  logger.info("{} of {} bytes on {} ranks: {} ({})", to_string(query.collective), query.bytes, query.size,
              to_string(algorithm), why());
}

bool spans_hosts(const TunerQuery& query) { return query.hosts != nullptr && query.hosts->spanned_hosts() > 1; }

// "2 hosts x 2 ranks, link ~0.119 GB/s and 52 us (probe); predicted 0.56 s against ring 0.84 s, ..."
std::string explain(const TunerQuery& query, const Predictions& predictions, Algorithm chosen) {
  const HostLayout& hosts = *query.hosts;
  std::string shape = hosts.usable()
                          ? fmt::format("{} hosts x {} ranks", hosts.hosts(), hosts.local_size())
                          : fmt::format("{} hosts, up to {} ranks on one", hosts.spanned_hosts(), hosts.largest_host());
  std::string text =
      fmt::format("{}, link ~{:.3g} GB/s and {:.3g} us ({}); predicted ", shape, query.link->bytes_per_second / 1e9,
                  query.link->latency_seconds * 1e6, query.link->source);
  std::string others;
  for (int i = 0; i < predictions.count; ++i) {
    const Prediction& item = predictions.items[static_cast<std::size_t>(i)];
    if (item.algorithm == chosen) {
      text += fmt::format("{:.3g} s", item.seconds);
    } else {
      others +=
          fmt::format("{}{} {:.3g} s", others.empty() ? " against " : ", ", to_string(item.algorithm), item.seconds);
    }
  }
  if (chosen == Algorithm::Hierarchical && predictions.best().algorithm != chosen) {
    others += fmt::format("; the hierarchy runs within {:.0f}% of the best", (kHierarchyMargin - 1) * 100);
  }
  return text + others;
}

}  // namespace

Choice choose(const TunerQuery& query) {
  bool across = spans_hosts(query);
  bool measured = across && query.link != nullptr && query.link->known();
  bool hierarchical = query.hosts != nullptr && query.hosts->usable();
  // Rings that cross the link pipeline its chunk; the hierarchy's phases inside a host keep the host's.
  auto choice_of = [&](Algorithm algorithm) {
    Choice choice{algorithm, ring_chunk_bytes(), ring_chunk_bytes(), Algorithm::Ring};
    if (measured) choice.link_chunk_bytes = link_chunk_bytes(*query.link);
    if (algorithm != Algorithm::Hierarchical) choice.chunk_bytes = choice.link_chunk_bytes;
    if (hierarchical) choice.across_hosts = across_hosts_algorithm(*query.hosts);
    return choice;
  };
  // What the group must be for an algorithm beyond exchanging messages (algorithm_table.hpp),
  // in words; null: nothing more.
  auto missing = [&](const AlgorithmEntry& entry) -> const char* {
    switch (entry.requirement) {
      case Requirement::SharedMemory:
        return query.shared_memory ? nullptr : "every rank of the group on one host over shared memory";
      case Requirement::Hierarchy:
        return hierarchical ? nullptr
                            : "the group on several hosts with the same number (more than one) of its ranks on each";
      case Requirement::None: return nullptr;
    }
    return nullptr;
  };
  if (query.requested != Algorithm::Auto) {
    const AlgorithmEntry* entry = find_algorithm(query.collective, query.requested);
    COMM_CHECK(entry != nullptr, InvalidArgumentError,
               (ErrorContext{.rank = query.rank, .op = to_string(query.collective)}),
               std::string(to_string(query.collective)) + " has no " + to_string(query.requested) +
                   " algorithm; name one the collective has (docs/collectives.md lists them), or none to let the "
                   "tuner choose");
    const char* needs = missing(*entry);
    COMM_CHECK(needs == nullptr, InvalidArgumentError,
               (ErrorContext{.rank = query.rank, .op = to_string(query.collective)}),
               std::string(to_string(query.collective)) + " with " + to_string(query.requested) + " needs " + needs +
                   "; name another algorithm, or none to let the tuner choose");
    return choice_of(query.requested);
  }
  Algorithm forced = environment_algorithm();
  const AlgorithmEntry* forced_entry = find_algorithm(query.collective, forced);
  if (forced_entry != nullptr && missing(*forced_entry) == nullptr) {
    log_once(query, forced, [] { return std::string("COMM_ALGO"); });
    return choice_of(forced);
  }
  if (measured) {
    Predictions predictions =
        predict(query.collective, query.bytes, query.size, *query.hosts, *query.link, link_chunk_bytes(*query.link));
    Prediction best = predictions.best();
    // The hierarchy runs where it is predicted within kHierarchyMargin of the best: its phases
    // inside a host reduce as data arrives in 2 MiB chunks, which the model does not credit.
    // Predicted within 1% of halving-doubling on 2 namespaced hosts x 2 ranks, it measured alike
    // at 1 Gbit/s and faster at 5 Gbit/s (16 MiB 36.9-39.8 ms against 46.4-49.3, 64 MiB 153-157
    // against 165-168; docs/results/multihost.md).
    // (Measured for the collectives that reduce or gather shards; a hierarchical broadcast or
    // reduce runs its phases one after the other, so it must be predicted the fastest.)
    bool margin = query.collective != Collective::Broadcast && query.collective != Collective::Reduce;
    for (int i = 0; margin && i < predictions.count; ++i) {
      const Prediction& item = predictions.items[static_cast<std::size_t>(i)];
      if (item.algorithm == Algorithm::Hierarchical && item.seconds <= best.seconds * kHierarchyMargin) best = item;
    }
    if (best.algorithm != Algorithm::Auto) {
      log_once(query, best.algorithm, [&] { return explain(query, predictions, best.algorithm); });
      return choice_of(best.algorithm);
    }
  }
  Algorithm algorithm = by_default(query);
  log_once(query, algorithm, [&] {
    return std::string(across ? "tuned; the link between hosts is not measured" : "tuned for one host");
  });
  return choice_of(algorithm);
}

void read_environment() {
  environment_algorithm();
  ring_chunk_bytes();
  link_from_environment();
}

namespace {

std::optional<std::size_t> ring_chunk_from_environment() {
  static const std::optional<std::size_t> value = []() -> std::optional<std::size_t> {
    // Below 4 KiB a chunk costs more in messages than it moves (1 byte: a 1 MiB all_reduce took 2.5 s).
    auto bytes = environment::get_integer_in("COMM_RING_CHUNK", 4096, std::int64_t{1} << 30,
                                             "bytes per pipelining chunk of the ring algorithms");
    if (!bytes) return std::nullopt;
    return static_cast<std::size_t>(*bytes);
  }();
  return value;
}

}  // namespace

std::size_t ring_chunk_bytes() { return ring_chunk_from_environment().value_or(std::size_t{2} << 20); }

std::size_t link_chunk_bytes(const LinkModel& link) {
  if (auto bytes = ring_chunk_from_environment()) return *bytes;
  if (!link.known()) return ring_chunk_bytes();
  // A chunk above the transport's eager size (MeshTransport::kEagerBytes, 64 KiB) waits for a
  // ClearToSend from the receiver, a round trip that on a loaded link queues behind the data in
  // flight: 3 namespaced hosts x 1 rank at 5 Gbit/s reached 45-58% of the link with 1.2 MB
  // chunks, 36-40% with 320 KB, 77-87% with 64 KiB (Gloo 88-89%), and at 1 Gbit/s 78-96% with
  // 240 KB against 99% with 64 KiB; 2 x 1 at 5 Gbit/s 86/94/96% against 77/86/93% (4-64 MiB).
  // So chunks stay eager up to 10 Gbit/s and grow with faster links (measured up to 5 Gbit/s
  // only), where the message rate would limit otherwise: 50 us of the link.
  constexpr double kChunkSeconds = 50e-6;
  constexpr std::size_t kSmallest = 64 * 1024, kLargest = 4 * 1024 * 1024, kPage = 4096;
  auto bytes = static_cast<std::size_t>(link.bytes_per_second * kChunkSeconds);
  return std::clamp(bytes / kPage * kPage, kSmallest, kLargest);
}

}  // namespace comm::algorithms
