// Helpers shared by the .cu files (and only them: this header includes the CUDA runtime):
// turning a cudaError_t into a comm::CudaError, and making a device current for a scope.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "comm/error.hpp"

namespace comm::cuda {

inline void check(cudaError_t status, const char* what, const char* op) {
  if (status != cudaSuccess) [[unlikely]] {
    throw CudaError(
        std::string(what) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")",
        ErrorContext{.op = op});
  }
}

// Makes `device` current and restores the caller's device afterwards, so library calls never
// change which GPU the application's own code runs on.
class DeviceGuard {
 public:
  DeviceGuard(int device, const char* op) {
    check(cudaGetDevice(&previous_), "cudaGetDevice", op);
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice", op);
  }
  ~DeviceGuard() {
    int current = previous_;
    if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// How many threads the device can keep resident at once: grids are sized to fill it once,
// with each thread looping over the rest (cached per device; attribute queries are not free).
int resident_threads(int device);

}  // namespace comm::cuda
