// CUDA IPC between processes on one host: device memory and events exported as handles (plain
// bytes, exchanged through the store or shared memory), and opened by the peer. Work is ordered
// across processes by IPC events waited on by streams, with host-side flags saying when an event
// has been recorded: no kernel ever spins on another process's data, which could deadlock when
// processes time-share one GPU without MPS. Plain C++; a build without nvcc throws.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <memory>

#include "comm/error.hpp"

namespace comm::cuda {

// cudaIpcMemHandle_t and cudaIpcEventHandle_t are both 64 opaque bytes.
struct IpcMemoryHandle {
  std::array<unsigned char, 64> bytes{};
};
struct IpcEventHandle {
  std::array<unsigned char, 64> bytes{};
};

// The handle of an allocation made with cudaMalloc, from its base address.
IpcMemoryHandle export_memory(void* allocation_base, int device);

// The cudaMalloc allocation a device pointer lies in (handles are per allocation, so a buffer
// inside a larger allocation travels as the allocation's handle plus an offset).
struct AllocationRange {
  void* base = nullptr;
  std::size_t bytes = 0;
};
AllocationRange allocation_range(const void* pointer, int device);

// A peer's allocation mapped into this process; unmapped on destruction.
class ImportedMemory {
 public:
  // Opening failed because memory the handle covers is still mapped here under an older handle
  // (the peer freed an allocation and made a new one over the same memory).
  struct AlreadyMapped : CudaError {
    using CudaError::CudaError;
  };
  ImportedMemory(const IpcMemoryHandle& handle, int device);
  // Waits until the device has run everything queued (before closing imports in use by it).
  static void quiesce(int device);
  ~ImportedMemory();
  ImportedMemory(const ImportedMemory&) = delete;
  ImportedMemory& operator=(const ImportedMemory&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  int device_ = 0;
};

// One peer's allocations this process has opened, by handle: opening costs a driver call, so
// they stay open between calls. A handle whose memory is still mapped under an older handle
// makes the cache close everything it holds (once the device has finished the work that may
// still read them) and open again.
class ImportCache {
 public:
  void* open(const IpcMemoryHandle& handle, int device) {
    auto found = opened_.find(handle.bytes);
    if (found != opened_.end()) return found->second->data();
    std::unique_ptr<ImportedMemory> memory;
    try {
      memory = std::make_unique<ImportedMemory>(handle, device);
    } catch (const ImportedMemory::AlreadyMapped&) {
      ImportedMemory::quiesce(device);
      opened_.clear();
      memory = std::make_unique<ImportedMemory>(handle, device);
    }
    return opened_.emplace(handle.bytes, std::move(memory)).first->second->data();
  }

 private:
  std::map<std::array<unsigned char, 64>, std::unique_ptr<ImportedMemory>> opened_;
};

// An event other processes can wait on (interprocess, no timing). The exporter records it; an
// importer makes its streams wait for the latest recording made before the wait was enqueued.
class InterprocessEvent {
 public:
  explicit InterprocessEvent(int device);                       // a new event, exportable
  InterprocessEvent(const IpcEventHandle& handle, int device);  // a peer's event
  ~InterprocessEvent();
  InterprocessEvent(const InterprocessEvent&) = delete;
  InterprocessEvent& operator=(const InterprocessEvent&) = delete;

  IpcEventHandle handle() const;
  void record(void* stream) const;
  void wait(void* stream) const;  // the stream waits; the host does not
  void synchronize() const;       // the host waits

 private:
  void* event_ = nullptr;
  int device_ = 0;
};

}  // namespace comm::cuda
