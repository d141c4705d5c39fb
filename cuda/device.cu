#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "comm/error.hpp"
#include "cuda/device.hpp"
#include "cuda/runtime.hpp"

namespace comm::cuda {
namespace {

void check(cudaError_t status, const char* what) { cuda::check(status, what, "cuda.self_test"); }

__global__ void add_one(const int* input, int* output, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) output[i] = input[i] + 1;
}

}  // namespace

DeviceStatus device_status() {
  DeviceStatus status;
  status.built_with_cuda = true;
  cudaError_t result = cudaGetDeviceCount(&status.device_count);
  if (result != cudaSuccess) {
    status.device_count = 0;
    status.reason = std::string(cudaGetErrorName(result)) + ": " + cudaGetErrorString(result);
  } else if (status.device_count == 0) {
    status.reason = "no CUDA device found";
  }
  return status;
}

void self_test(int device) {
  constexpr int kCount = 1 << 20;
  check(cudaSetDevice(device), "cudaSetDevice");
  std::vector<int> host(kCount);
  for (int i = 0; i < kCount; ++i) host[i] = i * 3;
  int* input = nullptr;
  int* output = nullptr;
  check(cudaMalloc(&input, kCount * sizeof(int)), "cudaMalloc");
  check(cudaMalloc(&output, kCount * sizeof(int)), "cudaMalloc");
  check(cudaMemcpy(input, host.data(), kCount * sizeof(int), cudaMemcpyHostToDevice), "cudaMemcpy");
  add_one<<<(kCount + 255) / 256, 256>>>(input, output, kCount);
  check(cudaGetLastError(), "kernel launch");
  std::vector<int> result(kCount);
  check(cudaMemcpy(result.data(), output, kCount * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(input);
  cudaFree(output);
  for (int i = 0; i < kCount; ++i) {
    if (result[i] != host[i] + 1) {
      throw CudaError("self test: element " + std::to_string(i) + " is " + std::to_string(result[i]) + ", expected " +
                          std::to_string(host[i] + 1),
                      ErrorContext{.op = "cuda.self_test"});
    }
  }
}

}  // namespace comm::cuda
