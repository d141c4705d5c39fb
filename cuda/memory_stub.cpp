// Built instead of memory.cu when nvcc is absent or -Dcuda=disabled: nothing can be allocated.
#include "comm/error.hpp"
#include "cuda/memory.hpp"

namespace comm::cuda {
namespace {

[[noreturn]] void built_without_cuda(const char* op) {
  throw CudaError("this libcomm was built without CUDA; rebuild with nvcc on PATH (meson setup -Dcuda=enabled)",
                  ErrorContext{.op = op});
}

}  // namespace

DeviceMemory::DeviceMemory(std::size_t, int) { built_without_cuda("cuda.malloc"); }
DeviceMemory::~DeviceMemory() = default;
DeviceMemory::DeviceMemory(DeviceMemory&&) noexcept = default;
DeviceMemory& DeviceMemory::operator=(DeviceMemory&&) noexcept = default;
PinnedMemory::PinnedMemory(std::size_t) { built_without_cuda("cuda.malloc_host"); }
PinnedMemory::~PinnedMemory() = default;
PinnedMemory::PinnedMemory(PinnedMemory&&) noexcept = default;
PinnedMemory& PinnedMemory::operator=(PinnedMemory&&) noexcept = default;
HostRegistration::HostRegistration(void*, std::size_t) { built_without_cuda("cuda.host_register"); }
HostRegistration::~HostRegistration() = default;
Stream::Stream(int) { built_without_cuda("cuda.stream"); }
Stream::~Stream() = default;
void Stream::synchronize() const { built_without_cuda("cuda.synchronize"); }
void Stream::synchronize_handle(void*, int) { built_without_cuda("cuda.synchronize"); }
Event::Event(int) { built_without_cuda("cuda.event"); }
Event::~Event() = default;
void Event::record(void*) const { built_without_cuda("cuda.event"); }
void Event::synchronize() const { built_without_cuda("cuda.event"); }
void Event::wait(void*) const { built_without_cuda("cuda.event"); }
void copy_async(void*, const void*, std::size_t, int, void*) { built_without_cuda("cuda.copy"); }
void copy(void*, const void*, std::size_t, int, void*) { built_without_cuda("cuda.copy"); }
void fill(void*, int, std::size_t, int, void*) { built_without_cuda("cuda.fill"); }
int device_of(const void*) { return -1; }
bool built_with_cuda() { return false; }
bool devices_present() { return false; }
int current_device() { return -1; }

}  // namespace comm::cuda
