#include "algorithms/cost_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "algorithms/ring.hpp"

namespace comm::algorithms {
namespace {

// The host's own medium, as the shared-memory transport measured on the development VM
// (docs/results/collectives.md: a few microseconds per message, several GB/s per rank), and
// the speed of a reduction in memory. Across hosts these are rarely what decides.
constexpr double kLocalLatency = 3e-6;
constexpr double kLocalBytesPerSecond = 4e9;
constexpr double kReduceBytesPerSecond = 4e9;

struct Model {
  const HostLayout& hosts;
  const LinkModel& link;

  // One step in which each rank sends `bytes` to one peer and `crossing` ranks of the busiest
  // host send theirs over its link at once.
  double step(double bytes, int crossing) const {
    if (crossing == 0) return kLocalLatency + bytes / kLocalBytesPerSecond;
    return link.latency_seconds + bytes * crossing / link.bytes_per_second;
  }
  // The flat ring: `steps` steps of `bytes_per_step`, the busiest host sending over its link as
  // many of them as it has ring neighbours on other hosts. Chunks overlap the steps, but each
  // pass of the pipeline fills and drains it: one chunk per step is not overlapped, once per
  // `passes` (ring_all_reduce goes round in rounds of kRingRoundSegmentBytes per segment).
  double ring(double bytes_per_step, int steps, double chunk, double passes) const {
    int crossing = std::max(hosts.ring_crossings(), 1);
    double fill = steps * step(std::min(chunk, bytes_per_step), crossing) * passes;
    return steps * step(bytes_per_step, crossing) + fill;
  }
};

int floor_log2(int size) { return std::bit_width(static_cast<unsigned>(size)) - 1; }

}  // namespace

Prediction Predictions::best() const {
  Prediction chosen;
  for (int i = 0; i < count; ++i) {
    if (chosen.algorithm == Algorithm::Auto || items[static_cast<std::size_t>(i)].seconds < chosen.seconds) {
      chosen = items[static_cast<std::size_t>(i)];
    }
  }
  return chosen;
}

Algorithm across_hosts_algorithm(const HostLayout& hosts) {
  int count = hosts.hosts();
  return (count & (count - 1)) == 0 ? Algorithm::HalvingDoubling : Algorithm::Ring;
}

Predictions predict(Collective collective, std::size_t bytes, int size, const HostLayout& hosts, const LinkModel& link,
                    std::size_t chunk_bytes) {
  Predictions out;
  if (!link.known() || hosts.spanned_hosts() < 2 || size < 2) return out;
  Model model{hosts, link};
  auto add = [&](Algorithm algorithm, double seconds) {
    out.items[static_cast<std::size_t>(out.count++)] = {algorithm, seconds};
  };
  double n = static_cast<double>(bytes);
  double p = size;
  auto chunk = static_cast<double>(chunk_bytes);
  int bits = floor_log2(size);
  bool power_of_two = (size & (size - 1)) == 0;
  // Ranks beyond the largest power of two fold their whole buffer into a partner and get the
  // result back: two more steps, counted as crossing.
  double fold = power_of_two ? 0 : 2 * model.step(n, 1);
  auto recursive_doubling = [&] {
    double seconds = fold;
    for (int bit = 0; bit < bits; ++bit)
      seconds += model.step(n, hosts.crossing_pairs(bit)) + n / kReduceBytesPerSecond;
    return seconds;
  };
  if (collective == Collective::AllReduce) {
    double segment = std::max(static_cast<double>(kRingRoundSegmentBytes), chunk);
    double rounds = std::max(1.0, std::ceil(n / p / segment));
    add(Algorithm::Ring, model.ring(n / p, 2 * (size - 1), chunk, rounds) + n * (p - 1) / p / kReduceBytesPerSecond);
    double halving = fold;
    for (int bit = 0; bit < bits; ++bit) {
      int crossing = hosts.crossing_pairs(bit);
      double half = n / static_cast<double>(std::size_t{2} << bit);
      // Chunks are reduced as the next arrive: only the last one's reduction shows.
      halving += 2 * model.step(half, crossing) + std::min(half, chunk) / kReduceBytesPerSecond;
    }
    add(Algorithm::RecursiveDoubling, recursive_doubling());
    add(Algorithm::HalvingDoubling, halving);
    if (hosts.usable()) {
      double local = hosts.local_size(), count = hosts.hosts();
      double inside = 2 * (local - 1) * (kLocalLatency + n / local / kLocalBytesPerSecond);
      // Each local place runs its own all_reduce of n/L among the hosts, all L at once.
      double across = across_hosts_algorithm(hosts) == Algorithm::HalvingDoubling
                          ? 2 * floor_log2(hosts.hosts()) * link.latency_seconds
                          : 2 * (count - 1) * link.latency_seconds;
      across += 2 * n * (count - 1) / count / link.bytes_per_second;
      // Its rings reduce chunks as they arrive, like halving-doubling: one chunk's reduction shows.
      add(Algorithm::Hierarchical, inside + across + std::min(n / local, chunk) / kReduceBytesPerSecond);
    }
  } else if (collective == Collective::AllGather || collective == Collective::ReduceScatter) {
    add(Algorithm::Ring, model.ring(n, size - 1, chunk, 1));
    if (hosts.usable()) {
      double local = hosts.local_size(), count = hosts.hosts();
      double across = (count - 1) * (link.latency_seconds + local * n / link.bytes_per_second);
      double inside = (local - 1) * (kLocalLatency + count * n / kLocalBytesPerSecond);
      add(Algorithm::Hierarchical, across + inside);
    }
  } else if ((collective == Collective::Broadcast || collective == Collective::Reduce) && hosts.usable()) {
    // Chains and trees reduce each chunk as it arrives: one chunk's reduction shows per chain,
    // a whole message's per level of a tree.
    bool reduces = collective == Collective::Reduce;
    double piece = std::min(n, chunk);
    auto chain = [&](int hops, int crossing) {
      if (hops < 1) return 0.0;
      return model.step(n, crossing) + (hops - 1) * model.step(piece, crossing) +
             (reduces ? piece / kReduceBytesPerSecond : 0);
    };
    int rounds = power_of_two ? bits : bits + 1;
    // The rounds at distance 2^bit (counted as recursive doubling's pairs cross; the tree's and
    // the dissemination's partners at that distance cross about as often).
    auto rounds_of = [&](double bytes, bool reducing) {
      double seconds = 0;
      for (int bit = 0; bit < rounds; ++bit) {
        seconds += model.step(bytes, hosts.crossing_pairs(bit)) + (reducing ? bytes / kReduceBytesPerSecond : 0);
      }
      return seconds;
    };
    // The chains and the tree leave ranks that only send, so the group confirms the call after
    // them (confirm_call: the dissemination barrier's rounds of empty messages).
    double confirm = rounds_of(0, false);
    // The flat chain from rank to rank + 1: each of the busiest host's chain edges that cross
    // carries the whole message over its link.
    add(Algorithm::Ring, chain(size - 1, std::max(hosts.ring_crossings(), 1)) + confirm);
    add(Algorithm::Tree, rounds_of(n, reduces) + confirm);
    // Once across each host's link (among the ranks at root's place), then inside the hosts.
    add(Algorithm::Hierarchical, chain(hosts.hosts() - 1, 1) + chain(hosts.local_size() - 1, 0) + confirm);
    // The tree's rounds, in which every rank also hears from every rank (no confirmation).
    add(reduces ? Algorithm::RecursiveDoubling : Algorithm::Dissemination,
        reduces ? recursive_doubling() : rounds_of(n, false));
  }
  return out;
}

}  // namespace comm::algorithms
