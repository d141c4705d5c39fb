#include "libcomm/base/oversubscription.hpp"

#include <thread>

namespace comm::detail {

void note_ranks_on_host(int ranks) {
  unsigned cores = std::thread::hardware_concurrency();  // 0: unknown
  if (cores > 0 && static_cast<unsigned>(ranks) > cores) yield_each_poll.store(true, std::memory_order_relaxed);
}

}  // namespace comm::detail
