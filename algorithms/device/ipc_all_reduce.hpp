// all_reduce of GPU buffers among ranks on one host, through CUDA IPC: ranks read and write
// their peers' buffers in place. Rank r reduces segment r of every peer's buffer into its own
// (reduce-scatter), then writes the result into segment r of every peer's buffer (all-gather
// by push), so all ranks end with the owner's bytes of each segment: bitwise identical.
//
// Two cross-process hand-offs per call, the fewest this needs: "my input is ready" before a
// peer reads it, and "I have pushed my segment to you" before a peer's call completes. Nobody
// else touches segment r of any buffer (only its owner reads and writes it), and a rank's pushes
// come after its own reads on its stream, so no other ordering is needed. On a GPU time-shared
// by processes every hand-off is a context switch (~140 us on the H100, docs/results/cuda.md).
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
  static constexpr int kPhases = 2;  // inputs ready; own segment pushed to every peer
  int device_;
  std::vector<std::unique_ptr<cuda::InterprocessEvent>> own_;                  // [phase]
  std::vector<std::vector<std::unique_ptr<cuda::InterprocessEvent>>> peers_;   // [peer][phase]
  std::vector<std::map<std::vector<unsigned char>, std::unique_ptr<cuda::ImportedMemory>>> opened_;  // [peer]
};

// In place on `data` (device memory of state.device()), ordered on `stream` (a cudaStream_t).
void ipc_all_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                    ReduceOp op, void* stream);

}  // namespace comm::algorithms
