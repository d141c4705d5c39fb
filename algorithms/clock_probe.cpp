#include "algorithms/clock_probe.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "algorithms/tree.hpp"

namespace comm::algorithms {
namespace {

constexpr int kClockTrips = 8;
// Steps: the trips' two messages each, a leader's answer to rank 0, then the table's broadcast.
constexpr std::uint64_t kClockAnswerStep = 2 * kClockTrips;
constexpr std::uint64_t kClockTableSteps = kClockAnswerStep + 1;

std::int64_t clock_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ClockOffset probe_clock_offset(const CollectiveContext& context, std::span<const int> host_of) {
  int size = context.size;
  int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  // Each host's leader: its lowest rank.
  std::vector<int> leader(static_cast<std::size_t>(hosts), -1);
  for (int rank = size - 1; rank >= 0; --rank) leader[static_cast<std::size_t>(host_of[static_cast<std::size_t>(rank)])] = rank;
  int home = host_of[0];
  // The table: per host, {offset, error}.
  std::vector<std::int64_t> table(static_cast<std::size_t>(2 * hosts), 0);
  int mine = host_of[static_cast<std::size_t>(context.rank)];
  if (context.rank == 0) {
    // One leader after the other, so that rank 0 answers each at once.
    for (int host = 0; host < hosts; ++host) {
      int peer = leader[static_cast<std::size_t>(host)];
      if (host == home || peer < 0) continue;
      for (int trip = 0; trip < kClockTrips; ++trip) {
        std::int64_t stamp = 0;
        context.recv_wait(peer, &stamp, sizeof stamp, static_cast<std::uint64_t>(2 * trip));
        stamp = clock_now_ns();
        context.send_wait(peer, &stamp, sizeof stamp, static_cast<std::uint64_t>(2 * trip + 1));
      }
      context.recv_wait(peer, &table[static_cast<std::size_t>(2 * host)], 2 * sizeof(std::int64_t), kClockAnswerStep);
    }
  } else if (mine != home && leader[static_cast<std::size_t>(mine)] == context.rank) {
    std::int64_t best_trip = std::numeric_limits<std::int64_t>::max(), offset = 0;
    for (int trip = 0; trip < kClockTrips; ++trip) {
      std::int64_t sent = clock_now_ns(), theirs = 0;
      context.send_wait(0, &sent, sizeof sent, static_cast<std::uint64_t>(2 * trip));
      context.recv_wait(0, &theirs, sizeof theirs, static_cast<std::uint64_t>(2 * trip + 1));
      std::int64_t received = clock_now_ns();
      if (received - sent < best_trip) {  // the fastest trip bounds the error best
        best_trip = received - sent;
        offset = theirs - (sent + (received - sent) / 2);
      }
    }
    std::int64_t answer[2] = {offset, (best_trip + 1) / 2};
    context.send_wait(0, answer, sizeof answer, kClockAnswerStep);
  }
  CollectiveContext announce = context;
  announce.step_base += kClockTableSteps;
  tree_broadcast(announce, table.data(), table.size() * sizeof(std::int64_t), 0);
  return ClockOffset{table[static_cast<std::size_t>(2 * mine)], table[static_cast<std::size_t>(2 * mine + 1)]};
}

}  // namespace comm::algorithms
