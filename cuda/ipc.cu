#include <cuda.h>  // types of the driver entry point only: nothing links libcuda itself
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "cuda/ipc.hpp"
#include "cuda/runtime.hpp"

namespace comm::cuda {

IpcMemoryHandle export_memory(void* allocation_base, int device) {
  DeviceGuard guard(device, "cuda.ipc_export");
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, allocation_base), "cudaIpcGetMemHandle", "cuda.ipc_export");
  IpcMemoryHandle result;
  static_assert(sizeof(handle) == sizeof(result.bytes));
  std::memcpy(result.bytes.data(), &handle, sizeof(handle));
  return result;
}

AllocationRange allocation_range(const void* pointer, int device) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  static GetAddressRange get_range = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &function, 12000, cudaEnableDefault, &found);
    return found == cudaDriverEntryPointSuccess ? reinterpret_cast<GetAddressRange>(function) : nullptr;
  }();
  if (get_range == nullptr)
    throw CudaError("the driver has no cuMemGetAddressRange", ErrorContext{.op = "cuda.ipc_export"});
  DeviceGuard guard(device, "cuda.ipc_export");
  // A driver call needs a current context, which a thread gets from its first runtime call that
  // binds one (cudaGetDevice does not): a collective's worker thread may not have made one yet.
  check(cudaSetDevice(device), "cudaSetDevice", "cuda.ipc_export");
  CUdeviceptr base = 0;
  std::size_t bytes = 0;
  if (get_range(&base, &bytes, reinterpret_cast<CUdeviceptr>(pointer)) != CUDA_SUCCESS) {
    throw CudaError(
        "cuMemGetAddressRange failed: the pointer is not device memory from cudaMalloc (CUDA IPC "
        "exports only that; for memory from cudaMallocAsync pools or cuMemCreate, set "
        "COMM_CUDA_PATH=staging on every rank)",
        ErrorContext{.op = "cuda.ipc_export"});
  }
  return {reinterpret_cast<void*>(base), bytes};
}

ImportedMemory::ImportedMemory(const IpcMemoryHandle& handle, int device) : device_(device) {
  DeviceGuard guard(device, "cuda.ipc_import");
  cudaIpcMemHandle_t native;
  std::memcpy(&native, handle.bytes.data(), sizeof(native));
  cudaError_t status = cudaIpcOpenMemHandle(&data_, native, cudaIpcMemLazyEnablePeerAccess);
  if (status == cudaErrorAlreadyMapped) {
    cudaGetLastError();  // not sticky; clear it for the retry
    data_ = nullptr;
    throw AlreadyMapped("cudaIpcOpenMemHandle: memory of this handle is still mapped under an older one",
                        ErrorContext{.op = "cuda.ipc_import"});
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string("cudaIpcOpenMemHandle failed: ") + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) +
                        "); CUDA IPC between these processes is not possible here "
                        "(separate containers or PID namespaces, say): set COMM_CUDA_PATH=staging on every rank",
                    ErrorContext{.op = "cuda.ipc_import"});
  }
}

void ImportedMemory::quiesce(int device) {
  DeviceGuard guard(device, "cuda.ipc_import");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "cuda.ipc_import");
}

ImportedMemory::~ImportedMemory() {
  if (data_ == nullptr) return;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  cudaIpcCloseMemHandle(data_);
  cudaSetDevice(previous);
}

InterprocessEvent::InterprocessEvent(int device) : device_(device) {
  DeviceGuard guard(device, "cuda.ipc_event");
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess), "cudaEventCreateWithFlags",
        "cuda.ipc_event");
  event_ = event;
}

InterprocessEvent::InterprocessEvent(const IpcEventHandle& handle, int device) : device_(device) {
  DeviceGuard guard(device, "cuda.ipc_event");
  cudaIpcEventHandle_t native;
  std::memcpy(&native, handle.bytes.data(), sizeof(native));
  cudaEvent_t event;
  check(cudaIpcOpenEventHandle(&event, native), "cudaIpcOpenEventHandle", "cuda.ipc_event");
  event_ = event;
}

InterprocessEvent::~InterprocessEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

IpcEventHandle InterprocessEvent::handle() const {
  cudaIpcEventHandle_t native;
  check(cudaIpcGetEventHandle(&native, static_cast<cudaEvent_t>(event_)), "cudaIpcGetEventHandle", "cuda.ipc_event");
  IpcEventHandle result;
  static_assert(sizeof(native) == sizeof(result.bytes));
  std::memcpy(result.bytes.data(), &native, sizeof(native));
  return result;
}

void InterprocessEvent::record(void* stream) const {
  DeviceGuard guard(device_, "cuda.ipc_event");
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord",
        "cuda.ipc_event");
}

void InterprocessEvent::wait(void* stream) const {
  DeviceGuard guard(device_, "cuda.ipc_event");
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
        "cudaStreamWaitEvent", "cuda.ipc_event");
}

void InterprocessEvent::synchronize() const {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize", "cuda.ipc_event");
}

}  // namespace comm::cuda
