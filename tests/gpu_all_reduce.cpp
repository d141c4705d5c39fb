// all_reduce of GPU buffers among the ranks of one host (CUDA IPC), run under commrun on the GPU
// machine: every dtype x op at several counts against the reference computed from every rank's
// input, bitwise-identical results on every rank, and stream ordering (a kernel writes the input
// just before the call and another reads the output just after, with no synchronisation between).
//   commrun -n 3 build/tests/gpu_all_reduce        exit 0: all correct, 1: wrong, 77: no GPU
#include <cstdio>
#include <string>

#include "comm/comm.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"
#include "device.hpp"
#include "reduce.hpp"
#include "support/reduce_reference.hpp"

using namespace comm::testing;
namespace cuda = comm::cuda;

int main() {
  auto status = cuda::device_status();
  if (status.device_count == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
    return 77;
  }
  auto group = comm::init_process_group();
  int rank = group->rank(), size = group->size();
  const int device = 0;  // every rank on the one GPU, as users test multi-rank code
  cuda::Stream stream(device);
  group->set_cuda_stream(stream.handle());
  std::int64_t failures = 0, checked = 0;
  auto fail = [&](const std::string& what) {
    ++failures;
    std::fprintf(stderr, "[rank %d] FAIL %s\n", rank, what.c_str());
  };

  unsigned salt = 0;
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!comm::algorithms::supports(dtype, op)) continue;
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1003}, std::size_t{1000003}}) {
        if (count > 1003 && !(op == ReduceOp::Sum && (dtype == DType::Float32 || dtype == DType::BFloat16))) continue;
        auto inputs = all_inputs(size, dtype, count, ++salt);
        std::size_t bytes = count * comm::element_size(dtype);
        cuda::DeviceMemory buffer(bytes, device);
        cuda::copy(buffer.data(), inputs[static_cast<std::size_t>(rank)].data(), bytes, device);
        group->all_reduce(comm::Buffer(buffer.data(), count, dtype, {comm::Device::Kind::Cuda, device}), op);
        std::vector<std::uint8_t> result(bytes);
        cuda::copy(result.data(), buffer.data(), bytes, device);
        std::string what = std::string(comm::to_string(dtype)) + " " + comm::to_string(op) + " x " + std::to_string(count);
        if (count_wrong(result, inputs, dtype, op, count) != 0) fail(what + ": wrong values");
        // Bitwise identical: everyone's result against rank 0's, gathered on the CPU.
        std::vector<std::uint8_t> everyone(bytes * static_cast<std::size_t>(size));
        group->all_gather(comm::Buffer(everyone.data(), everyone.size(), DType::UInt8),
                          comm::Buffer(result.data(), bytes, DType::UInt8));
        for (int r = 1; r < size; ++r) {
          if (std::memcmp(everyone.data(), everyone.data() + static_cast<std::size_t>(r) * bytes, bytes) != 0) {
            fail(what + ": rank " + std::to_string(r) + " differs from rank 0");
          }
        }
        ++checked;
      }
    }
  }

  // Stream ordering: ones + rank written by a kernel just before, read by a kernel just after.
  {
    const std::size_t count = 1 << 20;
    std::vector<float> rank_values(count, static_cast<float>(rank)), ones(count, 1.0f);
    cuda::DeviceMemory data(count * 4, device), one(count * 4, device), out(count * 4, device);
    cuda::copy(data.data(), rank_values.data(), count * 4, device);
    cuda::copy(one.data(), ones.data(), count * 4, device);
    cuda::reduce(data.data(), data.data(), one.data(), count, DType::Float32, ReduceOp::Sum, device, stream.handle());
    group->iall_reduce(comm::Buffer(data.data(), count, DType::Float32, {comm::Device::Kind::Cuda, device}))->wait();
    cuda::reduce(out.data(), data.data(), one.data(), count, DType::Float32, ReduceOp::Sum, device, stream.handle());
    stream.synchronize();
    std::vector<float> result(count);
    cuda::copy(result.data(), out.data(), count * 4, device);
    float want = static_cast<float>(size * (size + 1) / 2 + 1);  // sum of (r + 1), then + 1
    std::size_t wrong = 0;
    for (float value : result) wrong += value != want;
    if (wrong != 0) fail("stream ordering: " + std::to_string(wrong) + " wrong elements");
    ++checked;
  }

  std::vector<std::int64_t> total{failures};
  group->all_reduce(total);
  if (rank == 0) {
    std::printf("gpu_all_reduce: %d ranks, %lld cases per rank, %lld failures\n", size, static_cast<long long>(checked),
                static_cast<long long>(total[0]));
  }
  return total[0] == 0 ? 0 : 1;
}
