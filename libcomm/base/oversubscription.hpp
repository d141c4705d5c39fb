// Whether this host runs more ranks than it has cores. A waiter on such a host gives its core
// away at every poll (sched_yield), not every 64th: the peer it waits for may be waiting for that
// very core (Open MPI yields when it finds itself oversubscribed, for the same reason). Measured
// on the 2-core VM, the skewed all_to_all_v at 1 MiB on 8 ranks: 577-707 us polling, 337-342
// yielding (docs/results/collectives.md).
#pragma once

#include <atomic>

namespace comm::detail {

// The transport's set-up says how many ranks share this host (the most it has seen).
void note_ranks_on_host(int ranks);
// Whether waiters yield at every poll; set once the ranks outnumber the online cores.
inline std::atomic<bool> yield_each_poll{false};
// For tests and the set-up: whether `ranks` ranks oversubscribe `cores` cores.
inline bool oversubscribes(int ranks, unsigned cores) { return cores > 0 && static_cast<unsigned>(ranks) > cores; }

}  // namespace comm::detail
