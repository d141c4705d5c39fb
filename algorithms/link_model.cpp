#include "algorithms/link_model.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "algorithms/tree.hpp"
#include "libcomm/base/environment.hpp"

namespace comm::algorithms {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kRoundTrips = 9;  // the first warms the path and is not counted
// The transfer grows by 4x from the smallest (a warm-up) until one lasts kLongEnough or reaches
// the largest: 1 Gbit/s stops at 4 MiB (~45 ms in all), 100 Mbit/s at 1 MiB (~105 ms), faster
// links at 16 MiB.
constexpr std::size_t kSmallestTransfer = 256 * 1024;
constexpr std::size_t kLargestTransfer = 16 * 1024 * 1024;
constexpr double kLongEnough = 0.02;
constexpr double kSlowWarmUp = 0.1;  // a warm-up this slow is the measurement (10 Mbit/s: 210 ms)
// Steps: round trips, then per transfer size the data and rank 0's go-on/stop word, then the
// broadcast of the result.
constexpr std::uint64_t kTransferSteps = 2 * kRoundTrips;
constexpr std::uint64_t kResultSteps = 100;

}  // namespace

std::optional<LinkModel> link_from_environment() {
  auto gigabits = environment::link_gigabits();
  auto latency = environment::get_number_in("COMM_LINK_LATENCY_US", 0.0, 10000000.0,
                                            "one small message across the link between hosts, in microseconds");
  if (!gigabits) return std::nullopt;
  return LinkModel{latency.value_or(50.0) * 1e-6, *gigabits * 1e9 / 8, "COMM_LINK_GBPS"};
}

LinkModel probe_link(const CollectiveContext& context, int peer) {
  // Rank 0's figures: {latency in seconds, bytes per second}.
  std::array<double, 2> result{0, 0};
  if (context.rank == 0 || context.rank == peer) {
    bool measuring = context.rank == 0;
    int other = measuring ? peer : 0;
    std::uint64_t word = 0;
    std::array<double, kRoundTrips - 1> halves{};
    for (int trip = 0; trip < kRoundTrips; ++trip) {
      auto step = static_cast<std::uint64_t>(2 * trip);
      auto start = Clock::now();
      if (measuring) {
        context.send_wait(other, &word, sizeof word, step);
        context.recv_wait(other, &word, sizeof word, step + 1);
        if (trip > 0) halves[static_cast<std::size_t>(trip - 1)] = seconds_since(start) / 2;
      } else {
        context.recv_wait(other, &word, sizeof word, step);
        context.send_wait(other, &word, sizeof word, step + 1);
      }
    }
    std::sort(halves.begin(), halves.end());
    result[0] = halves[halves.size() / 2];

    // Both ways at once, as the collectives use the link. The first transfer warms the
    // connection (TCP's slow start, the peer's scheduling) and is not counted unless it is the
    // only one; of the others the fastest counts, so a transfer slowed by whatever else runs at
    // init (a probe once read a 1 Gbit/s link as 70 Mbit/s from one 256 KiB transfer) does not.
    std::vector<std::uint8_t> outgoing(kLargestTransfer, 1), incoming(kLargestTransfer);
    std::uint64_t step = kTransferSteps;
    double warm_up = 0, fastest = 0;
    for (std::size_t bytes = kSmallestTransfer;; bytes *= 4) {
      auto start = Clock::now();
      context.exchange(other, outgoing.data(), bytes, other, incoming.data(), bytes, step++);
      double seconds = std::max(seconds_since(start), 1e-9);
      bool first = bytes == kSmallestTransfer;
      double rate = static_cast<double>(bytes) / seconds;
      if (first) {
        warm_up = rate;
      } else {
        fastest = std::max(fastest, rate);
      }
      // After the warm-up, one more unless the link is so slow that it would take long.
      double enough = first ? kSlowWarmUp : kLongEnough;
      std::uint8_t go_on = measuring && seconds < enough && bytes < kLargestTransfer;
      if (measuring) {
        context.send_wait(other, &go_on, 1, step++);
      } else {
        context.recv_wait(other, &go_on, 1, step++);
      }
      if (!go_on) break;
    }
    result[1] = fastest > 0 ? fastest : warm_up;
  }
  CollectiveContext announce = context;
  announce.step_base += kResultSteps;
  tree_broadcast(announce, result.data(), sizeof result, 0);
  return LinkModel{result[0], result[1], "probe"};
}

}  // namespace comm::algorithms
