// The reduction kernels: one template per (storage type, op), dispatched from the type-erased
// entry points of reduce.hpp. Memory-bound by design, so the work is all in the access pattern:
// 16-byte vector loads and stores (uint4) over the aligned body, consecutive threads on
// consecutive vectors (coalesced), four vectors in flight per thread, a grid that fills the
// device once and loops. Unaligned heads and tails, and buffers whose misalignments differ, take
// a plain element loop.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cuda/reduce.hpp"
#include "cuda/runtime.hpp"
#include "libcomm/base/dtype_dispatch.hpp"

namespace comm::cuda {
namespace {

using detail::BFloat16;
using detail::Float16;

// How each storage type computes: itself, or float for the half types (as the CPU loops do).
template <class T>
struct Arithmetic {
  using Compute = T;
  __device__ static T load(T value) { return value; }
  __device__ static T store(T value) { return value; }
};
template <>
struct Arithmetic<Float16> {
  using Compute = float;
  __device__ static float load(Float16 value) { return __half2float(__ushort_as_half(value.bits)); }
  __device__ static Float16 store(float value) { return {__half_as_ushort(__float2half_rn(value))}; }
};
template <>
struct Arithmetic<BFloat16> {
  using Compute = float;
  __device__ static float load(BFloat16 value) { return __bfloat162float(__ushort_as_bfloat16(value.bits)); }
  __device__ static BFloat16 store(float value) { return {__bfloat16_as_ushort(__float2bfloat16_rn(value))}; }
};

// The same operator definitions as the CPU loops (bool: Sum is OR, Product is AND), so both
// sides give the same bits for the same inputs.
using detail::WrappingType;

struct Sum {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) + static_cast<WrappingType<C>>(b));
  }
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};
struct Product {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(static_cast<WrappingType<C>>(a) * static_cast<WrappingType<C>>(b));
  }
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};
struct Min {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return b < a ? b : a;
  }
};
struct Max {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return a < b ? b : a;
  }
};
struct BitAnd {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};
struct BitOr {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};
struct BitXor {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
  __device__ bool operator()(bool a, bool b) const { return a != b; }
};

template <class T, class Op>
__device__ T combine(T a, T b) {
  using A = Arithmetic<T>;
  return A::store(Op{}(A::load(a), A::load(b)));
}

// 16 bytes viewed as elements.
template <class T>
union Vector {
  uint4 raw;
  T elements[sizeof(uint4) / sizeof(T)];
};

template <class T, class Op>
__device__ uint4 combine_vector(uint4 a, uint4 b) {
  Vector<T> x{a}, y{b};
#pragma unroll
  for (unsigned k = 0; k < sizeof(uint4) / sizeof(T); ++k) x.elements[k] = combine<T, Op>(x.elements[k], y.elements[k]);
  return x.raw;
}

constexpr int kThreads = 512;
constexpr int kVectorsInFlight = 4;

// Elements [0, head) and [tail_start, count) one by one; vectors in between, `vectors` of them
// starting at element head, which is 16-byte aligned in all three buffers. head and the tail are
// shorter than one vector, so the first threads of the grid take them.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(T* out, const T* a, const T* b, std::size_t head, std::size_t vectors, std::size_t count) {
  std::size_t thread = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t tail_start = head + vectors * (sizeof(uint4) / sizeof(T));
  if (thread < head) out[thread] = combine<T, Op>(a[thread], b[thread]);
  if (tail_start + thread < count)
    out[tail_start + thread] = combine<T, Op>(a[tail_start + thread], b[tail_start + thread]);

  auto* out_vectors = reinterpret_cast<uint4*>(out + head);
  auto* a_vectors = reinterpret_cast<const uint4*>(a + head);
  auto* b_vectors = reinterpret_cast<const uint4*>(b + head);
  std::size_t i = thread;
  for (; i + (kVectorsInFlight - 1) * stride < vectors; i += kVectorsInFlight * stride) {
    uint4 x[kVectorsInFlight], y[kVectorsInFlight];
#pragma unroll
    for (int k = 0; k < kVectorsInFlight; ++k) {
      x[k] = a_vectors[i + k * stride];
      y[k] = b_vectors[i + k * stride];
    }
#pragma unroll
    for (int k = 0; k < kVectorsInFlight; ++k) out_vectors[i + k * stride] = combine_vector<T, Op>(x[k], y[k]);
  }
  for (; i < vectors; i += stride) out_vectors[i] = combine_vector<T, Op>(a_vectors[i], b_vectors[i]);
}

// Misaligned relative to each other: element by element, still coalesced.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads) combine_elements_kernel(T* out, const T* a, const T* b, std::size_t count) {
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    out[i] = combine<T, Op>(a[i], b[i]);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) divide_kernel(T* data, std::size_t count, std::size_t divisor) {
  using A = Arithmetic<T>;
  using C = typename A::Compute;
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    if constexpr (std::is_floating_point_v<C>) {
      data[i] = A::store(A::load(data[i]) / static_cast<C>(divisor));
    } else {
      data[i] = static_cast<T>(data[i] / static_cast<C>(divisor));
    }
  }
}

unsigned grid_for(std::size_t work_items, int device) {
  std::size_t wanted = (work_items + kThreads - 1) / kThreads;
  std::size_t resident = static_cast<std::size_t>(resident_threads(device)) / kThreads;
  std::size_t blocks = wanted < resident ? wanted : resident;
  return static_cast<unsigned>(blocks > 0 ? blocks : 1);
}

template <class T, class Op>
void launch_combine(void* out_bytes, const void* a_bytes, const void* b_bytes, std::size_t count, int device,
                    cudaStream_t stream) {
  auto* out = static_cast<T*>(out_bytes);
  auto* a = static_cast<const T*>(a_bytes);
  auto* b = static_cast<const T*>(b_bytes);
  constexpr std::size_t kPerVector = sizeof(uint4) / sizeof(T);
  auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  bool same_alignment = (address(out) - address(a)) % sizeof(uint4) == 0 &&
                        (address(b) - address(a)) % sizeof(uint4) == 0 && address(a) % sizeof(T) == 0;
  if (!same_alignment) {
    combine_elements_kernel<T, Op><<<grid_for(count, device), kThreads, 0, stream>>>(out, a, b, count);
    return;
  }
  std::size_t head = ((sizeof(uint4) - address(a) % sizeof(uint4)) % sizeof(uint4)) / sizeof(T);
  if (head > count) head = count;
  std::size_t vectors = (count - head) / kPerVector;
  std::size_t threads = vectors / kVectorsInFlight;
  if (threads < kPerVector) threads = kPerVector;  // the head and tail need that many
  combine_kernel<T, Op><<<grid_for(threads, device), kThreads, 0, stream>>>(out, a, b, head, vectors, count);
}

template <class T>
void launch_for_op(void* out, const void* a, const void* b, std::size_t count, ReduceOp op, int device,
                   cudaStream_t stream) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return launch_combine<T, Sum>(out, a, b, count, device, stream);
    case ReduceOp::Product: return launch_combine<T, Product>(out, a, b, count, device, stream);
    case ReduceOp::Min: return launch_combine<T, Min>(out, a, b, count, device, stream);
    case ReduceOp::Max: return launch_combine<T, Max>(out, a, b, count, device, stream);
    case ReduceOp::BAnd:
      if constexpr (std::is_integral_v<T>) return launch_combine<T, BitAnd>(out, a, b, count, device, stream);
      break;
    case ReduceOp::BOr:
      if constexpr (std::is_integral_v<T>) return launch_combine<T, BitOr>(out, a, b, count, device, stream);
      break;
    case ReduceOp::BXor:
      if constexpr (std::is_integral_v<T>) return launch_combine<T, BitXor>(out, a, b, count, device, stream);
      break;
  }
  throw InvalidArgumentError(
      std::string("op ") + to_string(op) + " is bitwise; it takes integer or bool data, not floating point",
      ErrorContext{.op = "reduce"});
}

}  // namespace

int resident_threads(int device) {
  static std::array<std::atomic<int>, 64> cache{};
  if (device < 0 || device >= static_cast<int>(cache.size())) device = 0;
  int known = cache[device].load(std::memory_order_relaxed);
  if (known > 0) return known;
  int processors = 0, per_processor = 0;
  check(cudaDeviceGetAttribute(&processors, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute",
        "reduce");
  check(cudaDeviceGetAttribute(&per_processor, cudaDevAttrMaxThreadsPerMultiProcessor, device),
        "cudaDeviceGetAttribute", "reduce");
  known = processors * per_processor;
  cache[device].store(known, std::memory_order_relaxed);
  return known;
}

void reduce(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op, int device,
            void* stream) {
  if (count == 0) return;
  DeviceGuard guard(device, "reduce");
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  detail::visit_dtype(dtype, [&]<class T>(T) { launch_for_op<T>(out, a, b, count, op, device, cuda_stream); });
  check(cudaGetLastError(), "reduction kernel launch", "reduce");
}

void divide(void* data, std::size_t count, DType dtype, std::size_t divisor, int device, void* stream) {
  if (count == 0 || divisor == 1 || dtype == DType::Bool) return;
  DeviceGuard guard(device, "reduce.avg");
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  detail::visit_dtype(dtype, [&]<class T>(T) {
    divide_kernel<T><<<grid_for(count, device), kThreads, 0, cuda_stream>>>(static_cast<T*>(data), count, divisor);
  });
  check(cudaGetLastError(), "division kernel launch", "reduce.avg");
}

}  // namespace comm::cuda
