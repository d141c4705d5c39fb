// The reduction seam: every algorithm combines data through these calls and nothing else, so
// the CUDA kernels (cuda/reduce.hpp) stand in for device buffers without an algorithm knowing.
//
// Types are erased here (pointer, count, dtype) and dispatched by one switch; the loops are
// templates inside cpu_reduce.cpp. float16 and bfloat16 compute in float and round once per
// element and step. bool: Sum and Max are OR, Product and Min are AND. Bitwise ops are for
// integers and bool only. Avg reduces as Sum, then divide() applies the division once.
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::algorithms {

// The ops refused per dtype, one bit per ReduceOp: bitwise ops on floating point, and an average
// of bool (truth values have no average a caller could rely on: an OR, a majority, a fraction?).
// A table, so that the check every reducing call makes is one load and a bit test.
namespace refusals {
constexpr unsigned op_bit(ReduceOp op) { return 1u << static_cast<unsigned>(op); }
constexpr unsigned char kBitwiseOps = op_bit(ReduceOp::BAnd) | op_bit(ReduceOp::BOr) | op_bit(ReduceOp::BXor);
// One row per kind of dtype.
// clang-format off
constexpr unsigned char kRefusedOps[] = {
    0, 0, 0, 0, 0, 0,                                    // Int8 ... UInt64
    kBitwiseOps, kBitwiseOps, kBitwiseOps, kBitwiseOps,  // Float16, BFloat16, Float32, Float64
    op_bit(ReduceOp::Avg),                               // Bool
};
// clang-format on
static_assert(sizeof kRefusedOps == static_cast<std::size_t>(DType::Bool) + 1, "one entry per DType");
}  // namespace refusals

// Whether op may be applied to dtype. Inline: every reducing call asks.
constexpr bool supports(DType dtype, ReduceOp op) {
  auto index = static_cast<std::size_t>(dtype);
  return index < sizeof refusals::kRefusedOps && (refusals::kRefusedOps[index] & refusals::op_bit(op)) == 0;
}

// Throws InvalidArgumentError naming the pair (out of line: only the error is built there).
[[noreturn]] void throw_unsupported(DType dtype, ReduceOp op, int rank);

// Throws InvalidArgumentError naming the pair when !supports(dtype, op). Inline, so the common
// case costs a compare on every reducing call.
inline void check_supported(DType dtype, ReduceOp op, int rank = -1) {
  if (!supports(dtype, op)) [[unlikely]]
    throw_unsupported(dtype, op, rank);
}

// dst[i] = dst[i] op src[i] for i < count. dst and src may be the same buffer; other overlap
// is not allowed. Avg reduces as Sum. On a CUDA device the work is enqueued on `stream` (a
// cudaStream_t; nullptr: the legacy default stream) and the call returns before it is done.
void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Device device = {},
            void* stream = nullptr);

// out[i] = a[i] op b[i] (the operands in that order): a reduction and a copy in one pass. out
// may be a or b; no other overlap. On a CUDA device, enqueued as reduce() is.
void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op, Device device = {},
             void* stream = nullptr);

// data[i] /= divisor, for the end of an Avg (integers divide toward zero, as C++ does).
void divide(void* data, std::size_t count, DType dtype, std::size_t divisor, Device device = {},
            void* stream = nullptr);

}  // namespace comm::algorithms
