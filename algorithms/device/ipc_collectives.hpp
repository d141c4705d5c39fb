// Collectives on GPU buffers among ranks on one host, through CUDA IPC: ranks read and write
// their peers' buffers in place, with the CUDA kernels for reductions.
//
// Every call has the same frame (IpcCall): record "ready" on the group's stream, announce this
// rank's buffer (allocation handle + offset) to every peer through the transport, open the
// peers' buffers (cached: an open costs milliseconds) and make the stream wait for their "ready";
// then the collective's own copies and kernels; then record "finished", tell the peers, and make
// the stream wait for theirs, so no rank's call completes while a peer may still touch its
// buffer. Two cross-process hand-offs per call, the fewest a collective that reads or writes its
// peers' memory can need. No host synchronisation inside the operation and no kernel that spins
// on another process's memory (ranks may time-share one GPU).
//
// all_reduce: rank r reduces segment r of every buffer into its own, then pushes it into segment
// r of every peer's buffer; only a segment's owner reads or writes it anywhere, so every rank
// ends with the owner's bytes (bitwise identical). broadcast: non-roots copy from the root.
// reduce: the root reduces every peer's buffer into its own. all_gather: each rank pushes its
// input into block r of every output. reduce_scatter: rank r reduces block r of every input.
// gather: the root pulls; scatter and all_to_all: the sender pushes into the receivers' outputs.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"
#include "cuda/ipc.hpp"

namespace comm::algorithms {

// What a group keeps between calls: its events, the peers' imported events, opened buffers.
class IpcState {
 public:
  IpcState(int device, int size);
  ~IpcState();
  IpcState(const IpcState&) = delete;
  IpcState& operator=(const IpcState&) = delete;

  int device() const { return device_; }

 private:
  friend class IpcCall;
  static constexpr int kPhases = 2;  // buffer ready; finished with the peers' buffers
  int device_;
  std::vector<std::unique_ptr<cuda::InterprocessEvent>> own_;                 // [phase]
  std::vector<std::vector<std::unique_ptr<cuda::InterprocessEvent>>> peers_;  // [peer][phase]
  std::vector<cuda::ImportCache> opened_;                                     // [peer]
};

// `stream` is a cudaStream_t; every pointer is device memory of state.device().
void ipc_all_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                    ReduceOp op, void* stream);
void ipc_broadcast(const CollectiveContext& context, IpcState& state, void* data, std::size_t bytes, int root,
                   void* stream);
void ipc_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                ReduceOp op, int root, void* stream);
// output holds size() blocks of block_bytes; input is this rank's block (may be block rank()).
void ipc_all_gather(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                    std::size_t block_bytes, void* stream);
// input holds size() blocks of block_count elements; block rank() of their reduction into output.
void ipc_reduce_scatter(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                        std::size_t block_count, DType dtype, ReduceOp op, void* stream);
// The root pulls every rank's input into outputs[rank] (outputs only read on the root).
void ipc_gather(const CollectiveContext& context, IpcState& state, const void* input, std::size_t bytes,
                const std::vector<void*>& outputs, int root, void* stream);
// The root pushes inputs[rank] into every rank's output (inputs only read on the root).
void ipc_scatter(const CollectiveContext& context, IpcState& state, void* output, std::size_t bytes,
                 const std::vector<const void*>& inputs, int root, void* stream);
// Block j of this rank's input goes into block rank() of rank j's output (pushed). input must not
// be output (the caller copies an in-place input aside first).
void ipc_all_to_all(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                    std::size_t block_bytes, void* stream);

}  // namespace comm::algorithms
