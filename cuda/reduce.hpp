// Reductions on GPU memory: the CUDA half of the reduce seam (algorithms/reduce.hpp). Plain
// C++ so that algorithms can call it without CUDA headers; a build without nvcc links stubs
// that throw. Streams are passed as void* (a cudaStream_t; nullptr is the legacy default
// stream). Every call only enqueues work: nothing here synchronises with the host.
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::cuda {

// out[i] = a[i] op b[i] for i < count, on `device`, ordered on `stream`. out may be a or b
// (in place); other overlap is not allowed. Avg combines as Sum (divide() finishes it).
// float16/bfloat16 compute in float and round once per element, as the CPU loops do.
void reduce(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op, int device,
            void* stream);

// data[i] /= divisor, the end of an Avg (integers divide toward zero; bool is left alone).
void divide(void* data, std::size_t count, DType dtype, std::size_t divisor, int device, void* stream);

}  // namespace comm::cuda
