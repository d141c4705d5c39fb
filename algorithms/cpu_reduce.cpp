// CPU reduction loops. Each is a plain loop over restrict-qualified arrays that the compiler
// vectorizes at -O2 (see docs/design/reduce.md for how to check), one variant per way the
// output may alias an operand; half types convert to float per element.
#include <cstdint>
#include <type_traits>

#include "algorithms/cpu_reduce.hpp"
#include "algorithms/half.hpp"
#include "libcomm/base/dtype_dispatch.hpp"

#ifndef COMM_REDUCE_VARIANT
#define COMM_REDUCE_VARIANT baseline
#endif

namespace comm::algorithms::COMM_REDUCE_VARIANT {
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
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) + static_cast<WrappingType<C>>(b));
  }
  bool operator()(bool a, bool b) const { return a || b; }
};
struct Product {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) * static_cast<WrappingType<C>>(b));
  }
  bool operator()(bool a, bool b) const { return a && b; }
};
struct Min {
  template <class C>
  C operator()(C a, C b) const {
    return b < a ? b : a;
  }
};
struct Max {
  template <class C>
  C operator()(C a, C b) const {
    return a < b ? b : a;
  }
};
struct BitAnd {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};
struct BitOr {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};
struct BitXor {
  template <class C>
  C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
  bool operator()(bool a, bool b) const { return a != b; }
};

// out = out op b: two arrays.
template <class T, class Op>
void apply_into_first(void* out_bytes, const void* b_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* __restrict out = static_cast<T*>(out_bytes);
  const T* __restrict b = static_cast<const T*>(b_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(op(A::load(out[i]), A::load(b[i])));
}

// out = a op out: two arrays, the operands in the same order as everywhere else (Min and Max
// of -0.0 and +0.0, or of a NaN, depend on it, and every rank must get the same bits).
template <class T, class Op>
void apply_into_second(void* out_bytes, const void* a_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* __restrict out = static_cast<T*>(out_bytes);
  const T* __restrict a = static_cast<const T*>(a_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(op(A::load(a[i]), A::load(out[i])));
}

// out = a op b: three arrays.
template <class T, class Op>
void apply_apart(void* out_bytes, const void* a_bytes, const void* b_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* __restrict out = static_cast<T*>(out_bytes);
  const T* __restrict a = static_cast<const T*>(a_bytes);
  const T* __restrict b = static_cast<const T*>(b_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(op(A::load(a[i]), A::load(b[i])));
}

// a == b (out anywhere among them), so this variant has no restrict.
template <class T, class Op>
void apply_aliased(void* out_bytes, const void* a_bytes, const void* b_bytes, std::size_t count) {
  using A = Arithmetic<T>;
  T* out = static_cast<T*>(out_bytes);
  const T* a = static_cast<const T*>(a_bytes);
  const T* b = static_cast<const T*>(b_bytes);
  Op op;
  for (std::size_t i = 0; i < count; ++i) out[i] = A::store(op(A::load(a[i]), A::load(b[i])));
}

template <class T>
void reduce_typed(void* out, const void* a, const void* b, std::size_t count, ReduceOp op) {
  auto run = [&]<class Op>(Op) {
    if (a == b) {
      apply_aliased<T, Op>(out, a, b, count);
    } else if (out == a) {
      apply_into_first<T, Op>(out, b, count);
    } else if (out == b) {
      apply_into_second<T, Op>(out, a, count);
    } else {
      apply_apart<T, Op>(out, a, b, count);
    }
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

void cpu_reduce(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op) {
  detail::visit_dtype(dtype, [&]<class T>(T) { reduce_typed<T>(out, a, b, count, op); });
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

}  // namespace comm::algorithms::COMM_REDUCE_VARIANT
