// How a group moves GPU buffers: its path (CUDA IPC among the ranks of one host, or staging
// through pinned host memory), chosen on first use; the path's state, kept between calls; the
// CUDA stream its calls are ordered on; and the lanes of its GPU send/recv.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "algorithms/device/device_table.hpp"
#include "algorithms/device/ipc_point_to_point.hpp"
#include "algorithms/device/staged_collectives.hpp"
#include "comm/types.hpp"
#include "libcomm/src/collective_queue.hpp"
#include "transport/transport.hpp"

namespace comm {
namespace detail {

// One peer and direction of a group's GPU send/recv: a queue keeps its transfers in issue order
// (a blocking call runs inline when nothing is queued; isend/irecv run on the queue's thread,
// so a rank can post a receive and a send to the same peer and wait for both), with the pinned
// memory and events its transfers use. Lanes are independent, so neither path shares mutable
// state between threads.
struct GpuLane {
  explicit GpuLane(int device) : device(device) {}
  int device;
  std::unique_ptr<algorithms::StagingState> staging;  // made on first use, as is ipc
  std::unique_ptr<algorithms::IpcPointToPoint> ipc;
  CollectiveQueue queue;  // last: destroyed (its worker joined) before the members above
};

}  // namespace detail

class GroupDevices {
 public:
  GroupDevices(int rank, int size, std::uint32_t group_id, const transport::Transport& transport)
      : rank_(rank), size_(size), group_id_(group_id), transport_(transport) {}

  void set_stream(void* stream) { stream_ = stream; }
  void* stream() const { return stream_; }
  // CUDA IPC needs every rank of the group on this host; anything else stages. COMM_CUDA_PATH
  // overrides (the same on every rank: ranks on different paths get a mismatch error on their
  // first GPU call). Decided and logged once.
  algorithms::DevicePath path(const char* op);
  // What a collective on cuda:`device` runs with (the path's state made on first use); throws
  // when the group's GPU collectives use another device. `one_host_store`: the group's store when
  // its ranks share a host (staging then goes through a shared segment); else null.
  algorithms::DeviceResources resources(const char* op, int device, Store* one_host_store);
  // The lane of GPU transfers with `peer` in one direction (made on first use).
  detail::GpuLane& lane(const Buffer& buffer, int peer, bool receiving, const char* op);

 private:
  int rank_;
  int size_;
  std::uint32_t group_id_;
  const transport::Transport& transport_;
  void* stream_ = nullptr;
  std::optional<algorithms::DevicePath> path_;
  std::unique_ptr<algorithms::IpcState> ipc_;
  std::unique_ptr<algorithms::StagingState> staging_;
  std::mutex lanes_mutex_;
  std::map<std::pair<bool, int>, std::unique_ptr<detail::GpuLane>> lanes_;  // by (receiving, peer)
};

}  // namespace comm
