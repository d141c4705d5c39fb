// GPU collectives through pinned host memory: what runs when CUDA IPC cannot (ranks on several
// hosts, peers reached over TCP) or is turned off (COMM_CUDA_PATH=staging). Device data is copied
// into page-locked host buffers, travels over the group's transport like host data, and is copied
// back; reductions still run on the GPU (cuda/reduce.hpp), one chunk at a time as chunks arrive.
//
// all_reduce and reduce_scatter are the ring of ring.hpp with a device in the middle of each
// step: a chunk received into pinned memory is copied to the device, reduced into the rank's
// buffer there, and (if it travels on) copied back out and sent, while the other chunks of the
// step are on the wire. The host waits on an event per chunk only where it must send bytes the
// GPU produced. The other collectives only move bytes: they copy the device buffers to pinned
// memory once, run the host algorithm and copy the result back.
//
// Ranks that share a host (forced staging) stage all_reduce through one shared segment instead:
// each copies its piece from the GPU straight into its slot there, and peers copy what they need
// straight to their GPUs, so no CPU ever copies the bytes (the transport would, twice).
//
// Every function enqueues on `stream` and may return before the stream has run the last copies
// to the device; the caller waits for the stream (as the IPC path's caller does).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "comm/store_interface.hpp"
#include "comm/types.hpp"
#include "cuda/memory.hpp"

namespace comm::algorithms {

// A group's staging memory, kept between calls and grown on demand: pinned host buffers by
// slot, device scratch, and one event per chunk in flight. One call at a time uses it.
class StagingState {
 public:
  static constexpr int kHostSlots = 3, kDeviceSlots = 2;
  explicit StagingState(int device) : device_(device) {}
  int device() const { return device_; }
  std::uint8_t* host(int slot, std::size_t bytes);
  std::uint8_t* device_scratch(int slot, std::size_t bytes);
  const cuda::Event& event(std::size_t index);
  // The segment for staging among ranks of one host, made on the first call that asks (every
  // rank of the group asks in the same call: it is made collectively through `store`); null on
  // every rank when it could not be made, and then never asked for again.
  transport::SharedArena* shared_arena(const CollectiveContext& context, Store& store);
  // A second stream, for copies that overlap the group stream's work (made on first use).
  void* side_stream();

 private:
  int device_;
  std::array<cuda::PinnedMemory, kHostSlots> host_{};
  std::array<cuda::DeviceMemory, kDeviceSlots> device_scratch_{};
  std::vector<std::unique_ptr<cuda::Event>> events_;
  std::unique_ptr<cuda::Stream> side_stream_;
  bool shared_tried_ = false;
  std::unique_ptr<transport::SharedArena> shared_;
  std::unique_ptr<cuda::HostRegistration> shared_pinned_;  // after shared_: unregistered before unmapped
};

// In place on device memory `data` (count elements); every rank ends with the same bytes.
void staged_all_reduce(const CollectiveContext& context, StagingState& state, void* data, std::size_t count,
                       DType dtype, ReduceOp op, void* stream, std::size_t chunk_bytes);
// The same, through a shared segment of ranks on one host (StagingState::shared_arena).
void shared_staged_all_reduce(const CollectiveContext& context, transport::SharedArena& arena, StagingState& state,
                              void* data, std::size_t count, DType dtype, ReduceOp op, void* stream);
// input holds size x block_count elements; output (block_count) gets the reduction of block rank.
void staged_reduce_scatter(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                           std::size_t block_count, DType dtype, ReduceOp op, void* stream, std::size_t chunk_bytes);
// Every rank sends its input to the root, which reduces on its GPU as each arrives.
void staged_reduce(const CollectiveContext& context, StagingState& state, void* data, std::size_t count, DType dtype,
                   ReduceOp op, int root, void* stream);
void staged_broadcast(const CollectiveContext& context, StagingState& state, void* data, std::size_t bytes, int root,
                      void* stream, std::size_t chunk_bytes);
void staged_all_gather(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                       std::size_t block_bytes, void* stream, std::size_t chunk_bytes);
// The list form: block r lands in outputs[r].
void staged_all_gather(const CollectiveContext& context, StagingState& state, const std::vector<void*>& outputs,
                       const void* input, std::size_t block_bytes, void* stream, std::size_t chunk_bytes);
void staged_gather(const CollectiveContext& context, StagingState& state, const void* input, std::size_t bytes,
                   const std::vector<void*>& outputs, int root, void* stream);
void staged_scatter(const CollectiveContext& context, StagingState& state, void* output, std::size_t bytes,
                    const std::vector<const void*>& inputs, int root, void* stream);
void staged_all_to_all(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                       std::size_t block_bytes, void* stream);

}  // namespace comm::algorithms
