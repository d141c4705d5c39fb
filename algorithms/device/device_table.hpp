// The device side of the algorithm table: for each collective, what runs on GPU buffers on each
// of the two paths (CUDA IPC among the ranks of one host, or staging through pinned host memory,
// docs/cuda.md), over the same HostCall descriptor the host algorithms take. Every entry
// enqueues on the group's stream; the group then waits for the stream, so a call completes when
// its GPU work has run.
#pragma once

#include "algorithms/algorithm_table.hpp"
#include "algorithms/device/ipc_collectives.hpp"
#include "algorithms/device/staged_collectives.hpp"
#include "comm/store_interface.hpp"

namespace comm::algorithms {

enum class DevicePath { Ipc, Staging };

// What the group lends a GPU call: the path's state (the other is null), its stream, and for
// staging among the ranks of one host, the store that makes their shared segment.
struct DeviceResources {
  IpcState* ipc = nullptr;
  StagingState* staging = nullptr;
  void* stream = nullptr;
  Store* store = nullptr;  // null: the group spans hosts (no shared staging segment)
};

using DeviceEntryPoint = void (*)(const CollectiveContext& context, const HostCall& call,
                                  const DeviceResources& resources);

struct DeviceEntry {
  Collective collective;
  DevicePath path;
  // The algorithm the path runs, which the call's fingerprint names, so ranks that took
  // different paths get a mismatch error, not a hang.
  Algorithm algorithm;
  Hearing hearing;  // as the host table's (algorithm_table.hpp)
  DeviceEntryPoint run;
};

// Every collective up to all_to_all has an entry on each path; the others are an
// InvalidArgumentError on GPU buffers.
const DeviceEntry& find_device_algorithm(Collective collective, DevicePath path);

}  // namespace comm::algorithms
