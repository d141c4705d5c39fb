// Built instead of ipc.cu when nvcc is absent or -Dcuda=disabled.
#include "comm/error.hpp"
#include "cuda/ipc.hpp"

namespace comm::cuda {
namespace {

[[noreturn]] void built_without_cuda() {
  throw CudaError("this libcomm was built without CUDA; rebuild with nvcc on PATH (meson setup -Dcuda=enabled)",
                  ErrorContext{.op = "cuda.ipc"});
}

}  // namespace

IpcMemoryHandle export_memory(void*, int) { built_without_cuda(); }
AllocationRange allocation_range(const void*, int) { built_without_cuda(); }
ImportedMemory::ImportedMemory(const IpcMemoryHandle&, int) { built_without_cuda(); }
ImportedMemory::~ImportedMemory() = default;
void ImportedMemory::quiesce(int) { built_without_cuda(); }
InterprocessEvent::InterprocessEvent(int) { built_without_cuda(); }
InterprocessEvent::InterprocessEvent(const IpcEventHandle&, int) { built_without_cuda(); }
InterprocessEvent::~InterprocessEvent() = default;
IpcEventHandle InterprocessEvent::handle() const { built_without_cuda(); }
void InterprocessEvent::record(void*) const { built_without_cuda(); }
void InterprocessEvent::wait(void*) const { built_without_cuda(); }
void InterprocessEvent::synchronize() const { built_without_cuda(); }

}  // namespace comm::cuda
