// The device code in this binary runs on every GPU present (checked against a host reference).
#include <catch2/catch_test_macros.hpp>

#include "cuda/device.hpp"

TEST_CASE("the compiled kernels run on every visible device", "[cuda]") {
  auto status = comm::cuda::device_status();
  REQUIRE(status.built_with_cuda);
  REQUIRE(status.device_count > 0);
  for (int device = 0; device < status.device_count; ++device) {
    INFO("device " << device);
    CHECK_NOTHROW(comm::cuda::self_test(device));
  }
}
