// comm_mem_alloc/comm_mem_free: device memory handed to C as a bare pointer, owned here (one
// DeviceMemory per live allocation) until it is freed.
#include <map>
#include <mutex>

#include "comm/comm.h"
#include "cuda/memory.hpp"
#include "libcomm/c_api/results.hpp"

namespace {

struct Allocations {
  std::mutex mutex;
  std::map<void*, comm::cuda::DeviceMemory> live;
};

Allocations& allocations() {
  static Allocations registry;
  return registry;
}

}  // namespace

extern "C" {

comm_result_t comm_mem_alloc(void** ptr, size_t size) {
  return comm::c_api::guarded(nullptr, "comm_mem_alloc", [&] {
    comm::c_api::require(ptr != nullptr, COMM_INVALID_ARGUMENT, "ptr is NULL");
    *ptr = nullptr;
    int device = comm::cuda::current_device();
    comm::c_api::require(device >= 0 || !comm::cuda::built_with_cuda(), COMM_CUDA_ERROR,
                         "this process sees no CUDA device to allocate on");
    comm::cuda::DeviceMemory memory(size > 0 ? size : 1, device < 0 ? 0 : device);
    void* data = memory.data();
    std::lock_guard lock(allocations().mutex);
    allocations().live.emplace(data, std::move(memory));
    *ptr = data;
    return COMM_SUCCESS;
  });
}

comm_result_t comm_mem_free(void* ptr) {
  return comm::c_api::guarded(nullptr, "comm_mem_free", [&] {
    if (ptr == nullptr) return COMM_SUCCESS;
    std::lock_guard lock(allocations().mutex);
    auto found = allocations().live.find(ptr);
    comm::c_api::require(found != allocations().live.end(), COMM_INVALID_ARGUMENT,
                         "ptr was not allocated by comm_mem_alloc, or was freed already");
    allocations().live.erase(found);
    return COMM_SUCCESS;
  });
}

}  // extern "C"
