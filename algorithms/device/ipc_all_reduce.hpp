// all_reduce of GPU buffers among ranks on one host, through CUDA IPC: each rank reads its
// peers' buffers in place. Rank r reduces segment r of every peer's buffer into its own
// (reduce-scatter), then copies every other segment from its owner (all-gather), so all ranks
// end with the owner's bytes of each segment: bitwise identical.
//
// Ordering is stream-ordered and cross-process: each phase records an IPC event on the caller's
// stream and then tells the peers through the transport (a small message); a peer makes its
// stream wait for that event before it touches the buffer. No host synchronisation inside the
// operation and no kernel that spins on another process's memory (ranks may time-share one GPU).
//
// The state kept between calls (IpcState): this rank's three events, the peers' imported events,
// and the peers' allocations opened so far (opening a handle costs milliseconds).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "collective_context.hpp"
#include "comm/types.hpp"
#include "cuda/ipc.hpp"

namespace comm::algorithms {

class IpcState {
 public:
  IpcState(int device, int size);
  ~IpcState();
  IpcState(const IpcState&) = delete;
  IpcState& operator=(const IpcState&) = delete;

  int device() const { return device_; }

 private:
  friend void ipc_all_reduce(const CollectiveContext&, IpcState&, void*, std::size_t, DType, ReduceOp, void*);
  static constexpr int kPhases = 3;  // inputs ready, segment reduced, done reading peers
  int device_;
  std::vector<std::unique_ptr<cuda::InterprocessEvent>> own_;                  // [phase]
  std::vector<std::vector<std::unique_ptr<cuda::InterprocessEvent>>> peers_;   // [peer][phase]
  std::vector<std::map<std::vector<unsigned char>, std::unique_ptr<cuda::ImportedMemory>>> opened_;  // [peer]
};

// In place on `data` (device memory of state.device()), ordered on `stream` (a cudaStream_t).
void ipc_all_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                    ReduceOp op, void* stream);

}  // namespace comm::algorithms
