#include <cuda_runtime.h>

#include <utility>

#include "cuda/memory.hpp"
#include "cuda/runtime.hpp"

namespace comm::cuda {

DeviceMemory::DeviceMemory(std::size_t bytes, int device) : bytes_(bytes), device_(device) {
  DeviceGuard guard(device, "cuda.malloc");
  check(cudaMalloc(&data_, bytes > 0 ? bytes : 1), "cudaMalloc", "cuda.malloc");
}

DeviceMemory::~DeviceMemory() {
  if (data_ != nullptr) cudaFree(data_);  // cudaFree synchronizes the device as needed
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), device_(other.device_) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    DeviceMemory old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

PinnedMemory::PinnedMemory(std::size_t bytes) : bytes_(bytes) {
  check(cudaMallocHost(&data_, bytes > 0 ? bytes : 1), "cudaMallocHost", "cuda.malloc_host");
}

PinnedMemory::~PinnedMemory() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedMemory::PinnedMemory(PinnedMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedMemory& PinnedMemory::operator=(PinnedMemory&& other) noexcept {
  if (this != &other) {
    PinnedMemory old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HostRegistration::HostRegistration(void* data, std::size_t bytes) {
  check(cudaHostRegister(data, bytes, cudaHostRegisterPortable), "cudaHostRegister", "cuda.host_register");
  data_ = data;
}

HostRegistration::~HostRegistration() {
  if (data_ != nullptr) cudaHostUnregister(data_);
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device, "cuda.stream");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", "cuda.stream");
  handle_ = stream;
}

Stream::~Stream() {
  if (handle_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}

void Stream::synchronize() const {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize", "cuda.synchronize");
}

void Stream::synchronize_handle(void* stream, int device) {
  DeviceGuard guard(device, "cuda.synchronize");
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", "cuda.synchronize");
}

Event::Event(int device) : device_(device) {
  DeviceGuard guard(device, "cuda.event");
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags", "cuda.event");
  event_ = event;
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void Event::record(void* stream) const {
  DeviceGuard guard(device_, "cuda.event");
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord",
        "cuda.event");
}

void Event::synchronize() const {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize", "cuda.event");
}

void Event::wait(void* stream) const {
  DeviceGuard guard(device_, "cuda.event");
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
        "cudaStreamWaitEvent", "cuda.event");
}

void copy_async(void* destination, const void* source, std::size_t bytes, int device, void* stream) {
  if (bytes == 0) return;
  DeviceGuard guard(device, "cuda.copy");
  check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync", "cuda.copy");
}

void copy(void* destination, const void* source, std::size_t bytes, int device, void* stream) {
  copy_async(destination, source, bytes, device, stream);
  DeviceGuard guard(device, "cuda.copy");
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", "cuda.copy");
}

void fill(void* destination, int byte, std::size_t bytes, int device, void* stream) {
  DeviceGuard guard(device, "cuda.fill");
  check(cudaMemsetAsync(destination, byte, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync", "cuda.fill");
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", "cuda.fill");
}

bool built_with_cuda() { return true; }

bool devices_present() {
  static const bool present = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return present;
}

int current_device() {
  if (!devices_present()) return -1;
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

int device_of(const void* pointer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls do not see it
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

}  // namespace comm::cuda
