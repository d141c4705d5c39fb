#include "libcomm/base/oversubscription.hpp"

#include <thread>

namespace comm::detail {

void note_ranks_on_host(int ranks) {
  if (oversubscribes(ranks, std::thread::hardware_concurrency())) yield_each_poll.store(true, std::memory_order_relaxed);
}

}  // namespace comm::detail
