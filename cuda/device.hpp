// What CUDA devices this process can use. Plain C++: callers never include CUDA headers, and
// a build without nvcc links the stub beside this file, which reports "built without CUDA".
#pragma once

#include <string>

namespace comm::cuda {

struct DeviceStatus {
  bool built_with_cuda = false;
  int device_count = 0;
  std::string reason;  // why no device is usable, when device_count is 0
};

DeviceStatus device_status();

// Runs a small kernel on `device` and checks its result on the host: proves that the device
// code compiled into this binary runs on this GPU. Throws comm::CudaError on failure.
void self_test(int device);

}  // namespace comm::cuda
