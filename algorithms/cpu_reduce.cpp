// CPU reduction loops. Each is a plain loop over restrict-qualified arrays that the compiler
// vectorizes at -O2 (see docs/design/reduce.md for how to check); half types convert to float
// per element.
#include <cstdint>
#include <type_traits>

#include "dtype_dispatch.hpp"
#include "half.hpp"
#include "cpu_reduce.hpp"

namespace comm::algorithms {
namespace {

using detail::BFloat16;
using detail::Float16;

// How each storage type computes: itself, or float for the half types.
template <class T>
struct Arithmetic {
  using Compute = T;
  static T load(T value) { return value; }
  static T store(T value) { return value; }
};
template <>
struct Arithmetic<Float16> {
  using Compute = float;
  static float load(Float16 value) { return float16_to_float(value.bits); }
  static Float16 store(float value) { return {float_to_float16(value)}; }
};
template <>
struct Arithmetic<BFloat16> {
  using Compute = float;
  static float load(BFloat16 value) { return bfloat16_to_float(value.bits); }
  static BFloat16 store(float value) { return {float_to_bfloat16(value)}; }
};

using detail::WrappingType;

struct Sum {
  template <class C> C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) + static_cast<WrappingType<C>>(b));
  }
  bool operator()(bool a, bool b) const { return a || b; }
};
struct Product {
  template <class C> C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) * static_cast<WrappingType<C>>(b));
  }
  bool operator()(bool a, bool b) const { return a && b; }
};
struct Min {
  template <class C> C operator()(C a, C b) const { return b < a ? b : a; }
};
struct Max {
  template <class C> C operator()(C a, C b) const { return a < b ? b : a; }
};
struct BitAnd {
  template <class C> C operator()(C a, C b) const { return static_cast<C>(a & b); }
};
struct BitOr {
  template <class C> C operator()(C a, C b) const { return static_cast<C>(a | b); }
};
struct BitXor {
  template <class C> C operator()(C a, C b) const { return static_cast<C>(a ^ b); }
  bool operator()(bool a, bool b) const { return a != b; }
};

template <class T, class Op>
void apply(void* dst_bytes, const void* src_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* __restrict dst = static_cast<T*>(dst_bytes);
  const T* __restrict src = static_cast<const T*>(src_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) dst[i] = A::store(op(A::load(dst[i]), A::load(src[i])));
}

// In-place (dst == src) is allowed, so this variant has no restrict.
template <class T, class Op>
void apply_aliased(void* dst_bytes, const void* src_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* dst = static_cast<T*>(dst_bytes);
  const T* src = static_cast<const T*>(src_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) dst[i] = A::store(op(A::load(dst[i]), A::load(src[i])));
}

template <class T>
void reduce_typed(void* dst, const void* src, std::size_t count, ReduceOp op) {
  bool aliased = dst == src;
  auto run = [&]<class Op>(Op) {
    aliased ? apply_aliased<T, Op>(dst, src, count) : apply<T, Op>(dst, src, count);
  };
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return run(Sum{});
    case ReduceOp::Product: return run(Product{});
    case ReduceOp::Min: return run(Min{});
    case ReduceOp::Max: return run(Max{});
    case ReduceOp::BAnd:
      if constexpr (std::is_integral_v<T>) return run(BitAnd{});
      break;
    case ReduceOp::BOr:
      if constexpr (std::is_integral_v<T>) return run(BitOr{});
      break;
    case ReduceOp::BXor:
      if constexpr (std::is_integral_v<T>) return run(BitXor{});
      break;
  }
}

template <class T>
void divide_typed(void* bytes, std::size_t count, std::size_t divisor) {
  using A = Arithmetic<T>;
  using C = typename A::Compute;
  T* data = static_cast<T*>(bytes);
  if constexpr (std::is_floating_point_v<C>) {
    C factor = static_cast<C>(divisor);
    for (std::size_t i = 0; i < count; ++i) data[i] = A::store(A::load(data[i]) / factor);
  } else {
    auto by = static_cast<C>(divisor);
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<T>(data[i] / by);
  }
}

}  // namespace

void cpu_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  detail::visit_dtype(dtype, [&]<class T>(T) { reduce_typed<T>(dst, src, count, op); });
}

void cpu_divide(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  detail::visit_dtype(dtype, [&]<class T>(T) {
    if constexpr (std::is_same_v<T, bool>) {
      // The average of bools is not a bool; leave OR-ed values as they are.
    } else {
      divide_typed<T>(data, count, divisor);
    }
  });
}

}  // namespace comm::algorithms
