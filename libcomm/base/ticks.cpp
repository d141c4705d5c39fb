#include "libcomm/base/ticks.hpp"

#include <fstream>
#include <string>
#include <thread>

namespace comm::detail {

bool ticks_are_counter() {
#if defined(__x86_64__)
  // The kernel keeps the counter as its clock source only when it found it invariant and in step
  // across cores; otherwise (a VM whose counter jumps between hosts, say) it falls back, and so
  // does this.
  static const bool counter = [] {
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    return static_cast<bool>(source >> name) && name == "tsc";
  }();
  return counter;
#else
  return false;
#endif
}

TickScale::TickScale(bool counter, std::int64_t first_ticks, std::int64_t first_nanoseconds)
    : origin_ticks_(first_ticks), origin_nanoseconds_(first_nanoseconds) {
  if (!counter) return;  // ticks are nanoseconds already
  std::int64_t now_ticks = ticks(true), now_nanoseconds = steady_nanoseconds();
  // Too short a baseline for a good ratio (a dump right after start-up): stretch it to 2 ms.
  if (now_nanoseconds - first_nanoseconds < 2'000'000) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(2'000'000 - (now_nanoseconds - first_nanoseconds)));
    now_ticks = ticks(true);
    now_nanoseconds = steady_nanoseconds();
  }
  if (now_ticks > first_ticks) {
    per_tick_ = static_cast<double>(now_nanoseconds - first_nanoseconds) / static_cast<double>(now_ticks - first_ticks);
  }
}

}  // namespace comm::detail
