// What a spin loop does between two looks at memory another core writes.
#pragma once

namespace comm::detail {

// x86 `pause` (aarch64 `yield`): the loop leaves the shared line alone for a few cycles, so the
// writer gets it sooner, and the core does not speculate past the load, so there is no
// memory-order machine clear when the line does change. Measured on the 2-core VM: the 8-byte
// shared-memory round trip 0.44 -> 0.41 us (bench/ab_builds.py, 20 rounds, twice).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace comm::detail
