// Built instead of device.cu when nvcc is absent or -Dcuda=disabled.
#include "comm/error.hpp"
#include "cuda/device.hpp"

namespace comm::cuda {

DeviceStatus device_status() {
  return {false, 0, "libcomm was built without CUDA (no nvcc found, or -Dcuda=disabled)"};
}

void self_test(int) {
  throw CudaError("libcomm was built without CUDA; rebuild with nvcc on PATH and -Dcuda=enabled",
                  ErrorContext{.op = "cuda.self_test"});
}

}  // namespace comm::cuda
