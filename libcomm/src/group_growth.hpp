// How a running group opens places for newcomers (ProcessGroup::grow) and how a newcomer finds
// one (InitOptions::join): records in the job's store, under the job's group prefix.
#pragma once

#include <cstdint>
#include <string>

#include "comm/store.hpp"

namespace comm {

struct GrowthRecord {
  std::uint64_t generation = 0;  // job-wide: the store prefix of the grown group (growth_prefix)
  int size = 0;                  // the group's ranks before it grows
  int count = 0;                 // places opened for newcomers
};

inline std::string growth_prefix(std::uint64_t generation) { return "grow" + std::to_string(generation); }

// The key of the record newcomers read (the latest growth), written by the group's rank 0.
inline constexpr const char* kGrowthOpenKey = "grow/open";
// The record newcomers read (the latest growth), written by the group's rank 0.
void open_growth(Store& job_groups, const GrowthRecord& record);
// Waits (the store's timeout) for a growth to be opened, and returns it.
GrowthRecord read_growth(Store& job_groups);

}  // namespace comm
