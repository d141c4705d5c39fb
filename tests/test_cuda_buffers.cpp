// Buffers tagged with the wrong device, and calls mixing host and GPU memory, are refused with
// an error saying what is wrong, on a group of one rank (no transport needed).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "comm/comm.hpp"
#include "cuda/memory.hpp"

using Catch::Matchers::ContainsSubstring;
using comm::Buffer;
using comm::Device;
using comm::DType;

namespace {

std::shared_ptr<comm::ProcessGroup> group_of_one() {
  return comm::init_process_group({.rank = 0, .world_size = 1, .store = std::make_shared<comm::HashStore>()});
}

}  // namespace

TEST_CASE("a GPU pointer tagged as host memory, and the reverse, are refused", "[cuda][bad-input]") {
  auto group = group_of_one();
  comm::cuda::DeviceMemory device_memory(64 * sizeof(float), 0);
  std::vector<float> host(64, 1.0f);
  CHECK_THROWS_WITH(group->all_reduce(Buffer(device_memory.data(), 64, DType::Float32)),
                    ContainsSubstring("tagged cpu but its memory is on cuda:0"));
  CHECK_THROWS_WITH(group->broadcast(Buffer(host.data(), 64, DType::Float32, Device{Device::Kind::Cuda, 0}), 0),
                    ContainsSubstring("tagged cuda:0 but its memory is host memory"));
  CHECK_THROWS_WITH(group->send(Buffer(device_memory.data(), 64, DType::Float32), 0), ContainsSubstring("tagged cpu"));
}

TEST_CASE("one call does not mix host and GPU buffers", "[cuda][bad-input]") {
  auto group = group_of_one();
  comm::cuda::DeviceMemory device_memory(64 * sizeof(float), 0);
  std::vector<float> host(64, 1.0f);
  Buffer on_gpu(device_memory.data(), 64, DType::Float32, Device{Device::Kind::Cuda, 0});
  CHECK_THROWS_WITH(group->all_gather(on_gpu, Buffer(host)), ContainsSubstring("mixing host and GPU memory"));
  CHECK_THROWS_WITH(group->reduce_scatter(Buffer(host), on_gpu), ContainsSubstring("mixing host and GPU memory"));
  // Host memory keeps working beside a GPU.
  group->all_reduce(host);
  CHECK(host[0] == 1.0f);
}
