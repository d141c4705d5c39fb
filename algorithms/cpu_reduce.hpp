// The CPU loops behind the reduce seam (reduce.hpp checks arguments and picks CPU or CUDA).
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::algorithms {

// out[i] = a[i] op b[i]; out may be a or b, and a may be b; no other overlap.
void cpu_reduce(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op);
void cpu_divide(void* data, std::size_t count, DType dtype, std::size_t divisor);

}  // namespace comm::algorithms
