// How far each host's steady clock is from group rank 0's, measured once when a world group that
// spans hosts is made, so that the flight recorder's dumps of every rank go on one time axis
// (docs/debugging.md). Ranks of one host share their steady clock; each host's lowest rank
// trades timestamps with rank 0 a few times (NTP's way: the offset from the round trip's middle,
// off by at most half the round trip), rank 0 gathers the answers and hands every rank the table.
#pragma once

#include <cstdint>
#include <span>

#include "algorithms/collective_context.hpp"

namespace comm::algorithms {

struct ClockOffset {
  std::int64_t offset_ns = 0;  // rank 0's steady clock minus this rank's, at the same moment
  std::int64_t error_ns = 0;   // |error| bound: half the fastest round trip
};

// Collective over the whole group. `host_of[r]`: the host of group rank r (ranks of one host
// share a number); this rank's host's offset from rank 0's clock (0, 0 on rank 0's host).
ClockOffset probe_clock_offset(const CollectiveContext& context, std::span<const int> host_of);

}  // namespace comm::algorithms
