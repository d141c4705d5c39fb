// Whether this host runs more ranks than it has cores. A waiter on such a host gives its core
// away at every poll (sched_yield), not every 64th: the peer it waits for may be waiting for that
// very core (Open MPI yields when it finds itself oversubscribed, for the same reason). Measured
// on the 2-core VM, the skewed all_to_all_v at 1 MiB on 8 ranks: 577-707 us polling, 337-342
// yielding (docs/results/collectives.md).
#pragma once

#include <sched.h>

#include <atomic>

#include "libcomm/base/cpu_relax.hpp"

namespace comm::detail {

// The transport's set-up says how many ranks share this host; past the online cores, waiters
// yield at every poll from then on.
void note_ranks_on_host(int ranks);
inline std::atomic<bool> yield_each_poll{false};

// What a spin loop does between two polls: a pause, or on an oversubscribed host the core.
inline void pause_between_polls() {
  if (yield_each_poll.load(std::memory_order_relaxed)) {
    ::sched_yield();
  } else {
    cpu_relax();
  }
}

}  // namespace comm::detail
