// The CUDA reduction kernels: every dtype x op, in place and out of place, at counts and offsets
// that exercise the vector body, the unaligned head and tail, and mutually misaligned buffers.
// Results must be bitwise equal to the CPU loops (same IEEE operations, one rounding per step)
// and within tolerance of the independent double/int64 reference.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <random>

#include "algorithms/reduce.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"
#include "tests/support/reduce_reference.hpp"

using namespace comm::testing;
namespace cuda = comm::cuda;

namespace {

std::vector<std::uint8_t> to_host(const void* device_pointer, std::size_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  cuda::copy(host.data(), device_pointer, bytes, 0);
  return host;
}

}  // namespace

TEST_CASE("GPU reductions equal the CPU loops and the reference", "[cuda][reduce]") {
  // offsets in elements of (out, a, b) inside their allocations
  auto [count, out_offset, a_offset, b_offset] = GENERATE(table<std::size_t, std::size_t, std::size_t, std::size_t>(
      {{1, 0, 0, 0}, {7, 0, 0, 0}, {33, 1, 1, 1}, {1000003, 0, 0, 0}, {1000003, 3, 3, 3}, {4099, 1, 2, 3}}));
  std::mt19937 random(static_cast<unsigned>(count + 7 * a_offset));
  cuda::Stream stream(0);
  for (DType dtype : kAllTypes) {
    std::size_t size = comm::element_size(dtype);
    for (ReduceOp op : kAllOps) {
      if (!algorithms::supports(dtype, op)) continue;
      INFO(comm::to_string(dtype) << " " << comm::to_string(op) << ", count " << count << ", offsets " << out_offset
                                  << "/" << a_offset << "/" << b_offset);
      std::vector<std::vector<std::uint8_t>> inputs{random_buffer(dtype, count, random),
                                                    random_buffer(dtype, count, random)};
      std::size_t bytes = count * size;
      cuda::DeviceMemory out(bytes + 16 * size, 0), a(bytes + 16 * size, 0), b(bytes + 16 * size, 0);
      auto* out_at = static_cast<std::uint8_t*>(out.data()) + out_offset * size;
      auto* a_at = static_cast<std::uint8_t*>(a.data()) + a_offset * size;
      auto* b_at = static_cast<std::uint8_t*>(b.data()) + b_offset * size;
      cuda::copy(a_at, inputs[0].data(), bytes, 0);
      cuda::copy(b_at, inputs[1].data(), bytes, 0);

      // CPU: the seam's loops, in place into a copy of the first input.
      std::vector<std::uint8_t> expected = inputs[0];
      algorithms::reduce(expected.data(), inputs[1].data(), count, dtype, op);
      if (op == ReduceOp::Avg) algorithms::divide(expected.data(), count, dtype, 2);

      // GPU out of place, then the divide of an Avg on the output.
      cuda::reduce(out_at, a_at, b_at, count, dtype, op, 0, stream.handle());
      if (op == ReduceOp::Avg) cuda::divide(out_at, count, dtype, 2, 0, stream.handle());
      stream.synchronize();
      auto out_of_place = to_host(out_at, bytes);
      CHECK(out_of_place == expected);
      CHECK(count_wrong(out_of_place, inputs, dtype, op, count) == 0);
      CHECK(to_host(a_at, bytes) == inputs[0]);  // inputs untouched

      // GPU in place through the seam (dst op= src on the device).
      algorithms::reduce(a_at, b_at, count, dtype, op, {comm::Device::Kind::Cuda, 0}, stream.handle());
      if (op == ReduceOp::Avg)
        algorithms::divide(a_at, count, dtype, 2, {comm::Device::Kind::Cuda, 0}, stream.handle());
      stream.synchronize();
      CHECK(to_host(a_at, bytes) == expected);
    }
  }
}

TEST_CASE("GPU reductions of a buffer with itself and of zero elements", "[cuda][reduce]") {
  std::vector<float> values{1.5f, -2.0f, 3.25f};
  cuda::DeviceMemory data(values.size() * sizeof(float), 0);
  cuda::copy(data.data(), values.data(), values.size() * sizeof(float), 0);
  cuda::reduce(data.data(), data.data(), data.data(), values.size(), DType::Float32, ReduceOp::Sum, 0, nullptr);
  cuda::reduce(data.data(), data.data(), data.data(), 0, DType::Float32, ReduceOp::Sum, 0, nullptr);
  std::vector<float> result(values.size());
  cuda::copy(result.data(), data.data(), values.size() * sizeof(float), 0);
  CHECK(result == std::vector<float>{3.0f, -4.0f, 6.5f});
}

TEST_CASE("device_of tells GPU memory from host memory", "[cuda]") {
  cuda::DeviceMemory device_memory(64, 0);
  cuda::PinnedMemory pinned(64);
  std::vector<int> host(16);
  CHECK(cuda::device_of(device_memory.data()) == 0);
  CHECK(cuda::device_of(pinned.data()) == -1);
  CHECK(cuda::device_of(host.data()) == -1);
}
