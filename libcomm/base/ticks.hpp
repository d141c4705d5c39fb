// A clock cheap enough to read twice per message: the flight recorder stamps every call with it.
// On x86-64 it is the time-stamp counter (one instruction; the kernel's own clock source when
// the counter is invariant and synchronised across cores, which ticks_are_counter() checks
// once); elsewhere, or where the kernel does not trust the counter, the steady clock in
// nanoseconds. TickScale turns ticks into steady-clock nanoseconds, measured against the
// steady clock over the process's lifetime so far.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace comm::detail {

// Whether ticks() reads the time-stamp counter (decided once, at the first call).
bool ticks_are_counter();

inline std::int64_t steady_nanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `counter`: ticks_are_counter(), read by the caller once (the recorder keeps it).
inline std::int64_t ticks(bool counter) {
#if defined(__x86_64__)
  if (counter) [[likely]]
    return static_cast<std::int64_t>(__rdtsc());
#endif
  (void)counter;
  return steady_nanoseconds();
}

// ticks -> steady-clock nanoseconds, from two readings of both clocks (the first at start-up,
// the second now): exact for the steady clock's own ticks.
class TickScale {
 public:
  TickScale() = default;
  TickScale(bool counter, std::int64_t first_ticks, std::int64_t first_nanoseconds);
  std::int64_t nanoseconds(std::int64_t ticks) const {
    return origin_nanoseconds_ + static_cast<std::int64_t>(static_cast<double>(ticks - origin_ticks_) * per_tick_);
  }
  double nanoseconds_per_tick() const { return per_tick_; }

 private:
  std::int64_t origin_ticks_ = 0;
  std::int64_t origin_nanoseconds_ = 0;
  double per_tick_ = 1.0;
};

}  // namespace comm::detail
