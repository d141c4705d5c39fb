// The reduce seam: checks what every implementation would check, then hands CPU memory to the
// vectorized loops and GPU memory to the CUDA kernels (stubs that throw in a build without nvcc).
#include "algorithms/reduce.hpp"

#include <string>
#include <string_view>

#include "algorithms/cpu_reduce.hpp"
#include "cuda/reduce.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/environment.hpp"

namespace comm::algorithms {

bool cpu_reduce_uses_avx2() {
#if defined(COMM_HAVE_AVX2_REDUCE)
  static const bool use = [] {
    auto isa = environment::get("COMM_REDUCE_ISA");
    return __builtin_cpu_supports("avx2") && !(isa && std::string_view(*isa) == "baseline");
  }();
  return use;
#else
  return false;
#endif
}

void throw_unsupported(DType dtype, ReduceOp op, int rank) {
  if (dtype == DType::Bool && op == ReduceOp::Avg) {
    throw InvalidArgumentError("op avg of dtype bool has no meaning; use bor (any), band (all), or sum of an "
                               "integer copy to count",
                               ErrorContext{.rank = rank, .op = "reduce"});
  }
  throw InvalidArgumentError(std::string("op ") + to_string(op) + " is bitwise and dtype " + to_string(dtype) +
                                 " is floating point; bitwise ops take integer or bool data",
                             ErrorContext{.rank = rank, .op = "reduce"});
}

void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Device device, void* stream) {
  combine(dst, dst, src, count, dtype, op, device, stream);
}

void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op, Device device,
             void* stream) {
  check_supported(dtype, op);
  if (count == 0) return;
  if (device.kind == Device::Kind::Cuda) return cuda::reduce(out, a, b, count, dtype, op, device.index, stream);
#if defined(COMM_HAVE_AVX2_REDUCE)
  if (cpu_reduce_uses_avx2()) return avx2::cpu_reduce(out, a, b, count, dtype, op);
#endif
  baseline::cpu_reduce(out, a, b, count, dtype, op);
}

void divide(void* data, std::size_t count, DType dtype, std::size_t divisor, Device device, void* stream) {
  COMM_CHECK(divisor > 0, InvalidArgumentError, ErrorContext{.op = "reduce.avg"}, "cannot average over 0 ranks");
  if (count == 0 || divisor == 1) return;
  if (device.kind == Device::Kind::Cuda) return cuda::divide(data, count, dtype, divisor, device.index, stream);
#if defined(COMM_HAVE_AVX2_REDUCE)
  if (cpu_reduce_uses_avx2()) return avx2::cpu_divide(data, count, dtype, divisor);
#endif
  baseline::cpu_divide(data, count, dtype, divisor);
}

}  // namespace comm::algorithms
