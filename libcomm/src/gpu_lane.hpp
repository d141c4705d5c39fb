// One peer and direction of a group's GPU send/recv: a queue keeps its transfers in issue order
// (a blocking call runs inline when nothing is queued; isend/irecv run on the queue's thread,
// so a rank can post a receive and a send to the same peer and wait for both), with the pinned
// memory and events its transfers use. Lanes are independent, so neither path shares mutable
// state between threads.
#pragma once

#include <memory>

#include "algorithms/device/ipc_point_to_point.hpp"
#include "algorithms/device/staged_collectives.hpp"
#include "libcomm/src/collective_queue.hpp"

namespace comm::detail {

struct GpuLane {
  explicit GpuLane(int device) : device(device) {}
  int device;
  std::unique_ptr<algorithms::StagingState> staging;  // made on first use, as is ipc
  std::unique_ptr<algorithms::IpcPointToPoint> ipc;
  CollectiveQueue queue;  // last: destroyed (its worker joined) before the members above
};

}  // namespace comm::detail
