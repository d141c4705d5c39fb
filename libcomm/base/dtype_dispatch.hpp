// One switch from a runtime DType to a compile-time element type, shared by the CPU loops and
// the CUDA kernels. float16 and bfloat16 are visited as 16-bit storage structs: each side
// converts them to float in its own way (bit manipulation on the host, intrinsics on the GPU).
#pragma once

#include <cstdint>
#include <type_traits>

#include "comm/types.hpp"

namespace comm::detail {

struct Float16 {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

// The type integer Sum and Product compute in: unsigned for signed integers, so overflow wraps
// (two's complement, as documented) instead of being undefined behaviour; the type itself
// otherwise (small types promote to int, whose range their products cannot leave).
template <class C, bool = std::is_integral_v<C>&& std::is_signed_v<C> && (sizeof(C) >= sizeof(int))>
struct Wrapping {
  using type = C;
};
template <class C>
struct Wrapping<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <class C>
using WrappingType = typename Wrapping<C>::type;

// Calls visit(T{}) with T the storage type of dtype.
template <class Visit>
void visit_dtype(DType dtype, Visit&& visit) {
  switch (dtype) {
    case DType::Int8: return visit(std::int8_t{});
    case DType::UInt8: return visit(std::uint8_t{});
    case DType::Int32: return visit(std::int32_t{});
    case DType::UInt32: return visit(std::uint32_t{});
    case DType::Int64: return visit(std::int64_t{});
    case DType::UInt64: return visit(std::uint64_t{});
    case DType::Float16: return visit(Float16{});
    case DType::BFloat16: return visit(BFloat16{});
    case DType::Float32: return visit(float{});
    case DType::Float64: return visit(double{});
    case DType::Bool: return visit(bool{});
  }
}

}  // namespace comm::detail
