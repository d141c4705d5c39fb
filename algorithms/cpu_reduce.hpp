// The CPU loops behind the reduce seam (reduce.hpp checks arguments and picks CPU or CUDA).
// cpu_reduce.cpp is compiled once per instruction set, each copy in its own namespace: the
// baseline (x86-64's SSE2, or whatever the target's default is) and, on x86-64, AVX2; the seam
// picks one at run time. Both give the same bits: every op is one exact IEEE (or integer)
// operation per element, and no variant may contract them (no FMA).
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::algorithms {

#define COMM_CPU_REDUCE_DECLARATIONS                                                                     \
  /* out[i] = a[i] op b[i]; out may be a or b, and a may be b; no other overlap. */                      \
  void cpu_reduce(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op); \
  void cpu_divide(void* data, std::size_t count, DType dtype, std::size_t divisor);

namespace baseline {
COMM_CPU_REDUCE_DECLARATIONS
}
namespace avx2 {  // built only where COMM_HAVE_AVX2_REDUCE is defined
COMM_CPU_REDUCE_DECLARATIONS
}

// Whether the AVX2 loops run here (built, and the CPU has AVX2; COMM_REDUCE_ISA=baseline says no).
bool cpu_reduce_uses_avx2();

}  // namespace comm::algorithms
