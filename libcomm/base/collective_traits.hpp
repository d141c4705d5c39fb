// What each collective is, in one row: its name, its buffers, whether it has a root or reduces,
// which counts of an uneven form every rank must share, and the algorithm it runs unless the
// tuner weighs sizes. The pipeline, the checks' device rule, the fingerprint, the flight recorder,
// the tuner and the tests read these rows instead of keeping lists of their own: a new collective
// is a row here (the compiler refuses a table that misses one or is out of order), its two enum
// values (comm/types.hpp, comm/call.hpp), its public forms, its checks and its algorithm.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm {

struct CollectiveTraits {
  // One buffer read and written (broadcast, reduce, all_reduce); an input and an output (which
  // `in_place` ones accept as one, or one inside the other); none (barrier).
  enum class Buffers { One, Pair, NoBuffers };
  // The counts of an uneven form: none (Even); the same on every rank (folded into the call's
  // fingerprint, so a disagreement is a mismatch on every rank); or each rank's own, of which
  // each pair of ranks must agree (all_to_all_v: its algorithm checks on arrival).
  enum class Counts { Even, Shared, PerPair };

  Collective collective;
  const char* name;
  Buffers buffers;
  bool in_place;           // a Pair collective whose output may be its input or hold it
  bool rooted;             // has a root rank
  bool reduces;            // takes a ReduceOp
  Counts counts;
  bool device_from_input;  // the buffer every rank passes is the input (gather's)
  // What the tuner runs when no algorithm is asked for; Auto: it chooses by size and group.
  Algorithm default_algorithm;
};

namespace detail {

using enum CollectiveTraits::Buffers;
using enum CollectiveTraits::Counts;

// clang-format off
inline constexpr std::array kCollectiveTraits{
    //               collective                  name                buffers in_place rooted reduces counts  by_input default
    CollectiveTraits{Collective::Broadcast,      "broadcast",        One,    false,   true,  false,  Even,   false,   Algorithm::Auto},
    CollectiveTraits{Collective::Reduce,         "reduce",           One,    false,   true,  true,   Even,   false,   Algorithm::Auto},
    CollectiveTraits{Collective::AllReduce,      "all_reduce",       One,    false,   false, true,   Even,   false,   Algorithm::Auto},
    CollectiveTraits{Collective::AllGather,      "all_gather",       Pair,   true,    false, false,  Even,   false,   Algorithm::Ring},
    CollectiveTraits{Collective::ReduceScatter,  "reduce_scatter",   Pair,   true,    false, true,   Even,   false,   Algorithm::Ring},
    CollectiveTraits{Collective::Gather,         "gather",           Pair,   false,   true,  false,  Even,   true,    Algorithm::Direct},
    CollectiveTraits{Collective::Scatter,        "scatter",          Pair,   false,   true,  false,  Even,   false,   Algorithm::Direct},
    CollectiveTraits{Collective::AllToAll,       "all_to_all",       Pair,   true,    false, false,  Even,   false,   Algorithm::Direct},
    CollectiveTraits{Collective::AllToAllV,      "all_to_all_v",     Pair,   true,    false, false,  PerPair, false,  Algorithm::Direct},
    CollectiveTraits{Collective::AllGatherV,     "all_gather_v",     Pair,   true,    false, false,  Shared, false,   Algorithm::Direct},
    CollectiveTraits{Collective::ReduceScatterV, "reduce_scatter_v", Pair,   true,    false, true,   Shared, false,   Algorithm::Direct},
    CollectiveTraits{Collective::GatherV,        "gather_v",         Pair,   true,    true,  false,  Shared, true,    Algorithm::Direct},
    CollectiveTraits{Collective::ScatterV,       "scatter_v",        Pair,   true,    true,  false,  Shared, false,   Algorithm::Direct},
    CollectiveTraits{Collective::Barrier,        "barrier",          NoBuffers, false, false, false,  Even,   false,   Algorithm::Auto},
};
// clang-format on

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kCollectiveTraits.size(); ++i) {
    if (static_cast<std::size_t>(kCollectiveTraits[i].collective) != i) return false;
  }
  return true;
}
static_assert(kCollectiveTraits.size() == static_cast<std::size_t>(Collective::Barrier) + 1,
              "one row per collective: a new Collective needs its row here");
static_assert(rows_in_enum_order(), "the rows follow Collective's order");

}  // namespace detail

// The row of a valid collective (callers hold a Collective the checks made).
constexpr const CollectiveTraits& traits_of(Collective collective) {
  return detail::kCollectiveTraits[static_cast<std::size_t>(collective)];
}

// Every collective, in Collective's order (for tests and tools that cover them all).
constexpr const auto& all_collectives() { return detail::kCollectiveTraits; }

// The questions every call asks, as one bit per collective, made from the rows at compile time:
// a shift and a test on the hot path, where a row's field costs an index computation and a load.
namespace detail {
template <class Ask>
constexpr std::uint32_t collectives_where(Ask ask) {
  std::uint32_t bits = 0;
  for (const CollectiveTraits& row : kCollectiveTraits) {
    if (ask(row)) bits |= std::uint32_t{1} << static_cast<unsigned>(row.collective);
  }
  return bits;
}
static_assert(kCollectiveTraits.size() <= 32, "one bit per collective");
inline constexpr std::uint32_t kRooted = collectives_where([](const CollectiveTraits& row) { return row.rooted; });
inline constexpr std::uint32_t kDeviceFromInput =
    collectives_where([](const CollectiveTraits& row) { return row.device_from_input; });
inline constexpr std::uint32_t kSharedCounts =
    collectives_where([](const CollectiveTraits& row) { return row.counts == CollectiveTraits::Counts::Shared; });
inline constexpr std::uint32_t kPerPairCounts =
    collectives_where([](const CollectiveTraits& row) { return row.counts == CollectiveTraits::Counts::PerPair; });
constexpr bool has(std::uint32_t bits, Collective collective) {
  return ((bits >> static_cast<unsigned>(collective)) & 1u) != 0;
}
}  // namespace detail

constexpr bool is_rooted(Collective collective) { return detail::has(detail::kRooted, collective); }
constexpr bool device_from_input(Collective collective) { return detail::has(detail::kDeviceFromInput, collective); }
constexpr bool has_shared_counts(Collective collective) { return detail::has(detail::kSharedCounts, collective); }
constexpr bool has_per_pair_counts(Collective collective) { return detail::has(detail::kPerPairCounts, collective); }

// The names, as an array of pointers (to_string: every call names its collective).
inline constexpr auto kCollectiveNames = [] {
  std::array<const char*, detail::kCollectiveTraits.size()> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = detail::kCollectiveTraits[i].name;
  return names;
}();

}  // namespace comm
