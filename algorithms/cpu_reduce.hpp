// The CPU loops behind the reduce seam (reduce.hpp checks arguments and picks CPU or CUDA).
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::algorithms {

void cpu_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
void cpu_divide(void* data, std::size_t count, DType dtype, std::size_t divisor);

}  // namespace comm::algorithms
