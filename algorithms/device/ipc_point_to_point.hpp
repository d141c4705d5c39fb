// send/recv of GPU buffers between ranks on one host, through CUDA IPC: the sender announces
// its buffer (allocation handle + offset) and a "ready" event recorded on its stream; the
// receiver's stream waits for it, copies straight out of the sender's memory, records "done" and
// tells the sender, whose stream waits for that before the send completes. Between two ranks of
// one process (a send to itself) the buffer and events are used directly: CUDA opens no IPC
// handle in the process that made it. Blocking calls only (each returns once its stream has run
// the copy); both sides must pass GPU buffers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cuda/ipc.hpp"
#include "transport/transport.hpp"

namespace comm::algorithms {

// The tag bits the announcements and answers travel on, beside the user's point-to-point tag
// (which fills the low 31 bits) and below the group id.
constexpr std::uint64_t kGpuAnnounceTagBit = std::uint64_t{1} << 47;
constexpr std::uint64_t kGpuDoneTagBit = std::uint64_t{1} << 46;

class IpcPointToPoint {
 public:
  explicit IpcPointToPoint(int device);
  ~IpcPointToPoint();
  IpcPointToPoint(const IpcPointToPoint&) = delete;
  IpcPointToPoint& operator=(const IpcPointToPoint&) = delete;

  int device() const { return device_; }
  // `peer` is a transport rank; `tag` the point-to-point tag (group id included).
  void send(transport::Transport& transport, int peer, const void* data, std::size_t bytes, std::uint64_t tag,
            void* stream, std::chrono::milliseconds timeout);
  // Returns the bytes received; a message larger than `capacity` fails both sides.
  std::size_t recv(transport::Transport& transport, int peer, void* data, std::size_t capacity, std::uint64_t tag,
                   void* stream, std::chrono::milliseconds timeout);

 private:
  cuda::InterprocessEvent& imported(int peer, const cuda::IpcEventHandle& handle);

  int device_;
  cuda::InterprocessEvent ready_, done_;
  using Key = std::vector<unsigned char>;                                          // a handle's bytes
  std::map<int, std::map<Key, std::unique_ptr<cuda::InterprocessEvent>>> events_;  // [peer]
  std::map<int, cuda::ImportCache> opened_;                                        // [peer]
};

}  // namespace comm::algorithms
