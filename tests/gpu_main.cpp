// Entry point of the GPU test programs: without a usable CUDA device they print why and exit
// 77, which meson counts as skipped (Catch2 itself would exit 4 when every test skips).
#include <catch2/catch_session.hpp>

#include <cstdio>

#include "cuda/device.hpp"

int main(int argc, char** argv) {
  auto status = comm::cuda::device_status();
  if (status.device_count == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
