// GPU and pinned host memory as RAII objects, streams, and the copies between them: what the
// library, its tests and its benches need from the CUDA runtime, in plain C++ (no CUDA headers).
// In a build without nvcc every constructor throws a CudaError that says so.
#pragma once

#include <cstddef>

namespace comm::cuda {

// cudaMalloc'd memory on one device, freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(std::size_t bytes, int device);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

// Page-locked host memory (cudaMallocHost): what asynchronous host<->device copies need.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  explicit PinnedMemory(std::size_t bytes);
  ~PinnedMemory();
  PinnedMemory(PinnedMemory&& other) noexcept;
  PinnedMemory& operator=(PinnedMemory&& other) noexcept;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Host memory allocated elsewhere (e.g. a shared mapping) page-locked for DMA while this object
// lives (cudaHostRegister), so copies to and from it run asynchronously at full speed.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(void* data, std::size_t bytes);
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

 private:
  void* data_ = nullptr;
};

// A non-blocking stream of one device (cudaStreamNonBlocking: it does not wait for the
// legacy default stream), destroyed with the object. handle() is the cudaStream_t.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void* handle() const { return handle_; }
  int device() const { return device_; }
  void synchronize() const;
  // Waits for `stream` (a cudaStream_t of `device`; nullptr: the legacy default stream).
  static void synchronize_handle(void* stream, int device);

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

// A plain event (no timing) the host waits on: tells the host when work it enqueued on a stream,
// e.g. a device-to-host copy whose bytes it is about to send, has run.
class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(void* stream) const;
  void synchronize() const;
  void wait(void* stream) const;  // `stream` waits for the latest recording; the host does not

 private:
  void* event_ = nullptr;
  int device_ = 0;
};

// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing tells the direction), on
// `stream` (nullptr: the legacy default stream) of `device`.
void copy_async(void* destination, const void* source, std::size_t bytes, int device, void* stream);
// The same, then waits for the stream.
void copy(void* destination, const void* source, std::size_t bytes, int device, void* stream = nullptr);
void fill(void* destination, int byte, std::size_t bytes, int device, void* stream = nullptr);

// Whether `pointer` is memory of a CUDA device (cudaMalloc, or an opened IPC handle), and which.
// Host memory, pinned or not, and unknown pointers answer -1.
int device_of(const void* pointer);

// Whether this build has CUDA, and whether this process sees a device (asked once, then cached):
// argument checks look at pointers only where that can find anything.
bool built_with_cuda();
bool devices_present();
// The calling thread's current device (cudaGetDevice); -1 where there is none.
int current_device();

}  // namespace comm::cuda
