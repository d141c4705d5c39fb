// Staging among ranks of one host through a segment they all map (see staged_collectives.hpp):
// the segment's making and the all_reduce over it.
#include <algorithm>
#include <cstdint>
#include <string>

#include "algorithms/device/staged_collectives.hpp"
#include "algorithms/shared_memory.hpp"
#include "cuda/reduce.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"

namespace comm::algorithms {

// Bytes per slot of the shared staging segment (COMM_CUDA_STAGING_SLOT, default 16 MiB; the
// segment holds 2 x (ranks + 1) slots). Each piece costs two synchronisations, and ranks sharing
// a GPU switch contexts for every copy: 2 ranks on an H100, 256 MiB, reached 2.9 / 8.6 / 13.4 /
// 15.7 GB/s with 1 / 4 / 16 / 32 MiB slots (docs/results/cuda.md).
namespace {

std::size_t shared_slot_bytes() {
  static const std::size_t value = [] {
    auto bytes = environment::get_integer_in("COMM_CUDA_STAGING_SLOT", 4096, std::int64_t{1} << 30,
                                             "bytes per slot of the shared GPU staging segment");
    return bytes ? static_cast<std::size_t>(*bytes) : std::size_t{16} << 20;
  }();
  return value;
}

}  // namespace

transport::SharedArena* StagingState::shared_arena(const CollectiveContext& context, Store& store) {
  if (shared_tried_) return shared_.get();
  shared_tried_ = true;
  std::string key = "gpu-arena/" + std::to_string(context.group_id) + "/" + std::to_string(context.sequence);
  shared_ =
      context.transport.map_shared_arena(store, key, context.rank, context.size, context.timeout, shared_slot_bytes());
  if (shared_) {
    try {
      shared_pinned_ = std::make_unique<cuda::HostRegistration>(shared_->base(), shared_->bytes());
    } catch (const CudaError& error) {
      // Copies from pageable memory still work (slower, and not asynchronous): nothing to agree on.
      log::get(log::Subsystem::Cuda).warn("staging segment not page-locked, copies will be slower: {}", error.what());
    }
  }
  return shared_.get();
}

// Pieces of up to a slot, alternating between the arena's two buffers (see shared_memory.cpp for
// why a buffer is free again two pieces later; here "finished with it" includes the copies a
// rank queued, which its event waits before its flags cover). Per piece: copy out what peers
// need (all but this rank's segment), arrive; reduce this rank's segment from the peers' slots
// on the GPU and copy it to the result area, publish Reduced; copy the other segments in.
// The next piece's copy out runs on a second stream while this piece is reduced: its slot was
// last read two pieces back, which the Reduced wait of the previous piece covers.
void shared_staged_all_reduce(const CollectiveContext& context, transport::SharedArena& arena, StagingState& state,
                              void* data, std::size_t count, DType dtype, ReduceOp op, void* stream) {
  int n = context.size, r = context.rank, device = state.device();
  if (n == 1 || count == 0) return;
  std::size_t element = element_size(dtype), piece_count = arena.slot_bytes() / element;
  std::size_t pieces = (count + piece_count - 1) / piece_count;
  std::uint8_t* scratch = state.device_scratch(0, arena.slot_bytes());
  auto* all = static_cast<std::uint8_t*>(data);
  void* side = state.side_stream();
  const cuda::Event &started = state.event(0), &reduced = state.event(1);
  auto copied_out = [&](std::uint64_t epoch) -> const cuda::Event& { return state.event(2 + (epoch & 1)); };
  struct Piece {
    std::uint8_t* data;
    std::size_t begin, end, total;  // bytes: this rank's segment, and the piece
  };
  auto piece_at = [&](std::size_t index) {
    std::size_t elements = std::min(piece_count, count - index * piece_count);
    auto begin_of = [&](int rank) {
      return elements * static_cast<std::size_t>(rank) / static_cast<std::size_t>(n) * element;
    };
    return Piece{all + index * piece_count * element, begin_of(r), begin_of(r + 1), elements * element};
  };
  // Every byte but this rank's segment (which only it reads) into its slot, on the side stream.
  auto copy_out = [&](std::size_t index, std::uint64_t epoch) {
    Piece piece = piece_at(index);
    std::uint8_t* slot = arena.slot(static_cast<int>(epoch & 1), r);
    cuda::copy_async(slot, piece.data, piece.begin, device, side);
    cuda::copy_async(slot + piece.end, piece.data + piece.end, piece.total - piece.end, device, side);
    copied_out(epoch).record(side);
  };
  started.record(stream);
  started.wait(side);  // after the work the caller queued before
  std::uint64_t epoch = arena.next_epoch();
  copy_out(0, epoch);
  for (std::size_t index = 0; index < pieces; ++index) {
    Piece piece = piece_at(index);
    int buffer = static_cast<int>(epoch & 1);
    copied_out(epoch).synchronize();
    publish_and_wait(context, arena, Flag::Arrived, epoch);
    if (piece.end > piece.begin) {
      std::size_t bytes = piece.end - piece.begin, segment = bytes / element;
      std::uint8_t* mine = piece.data + piece.begin;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == r) continue;
        cuda::copy_async(scratch, arena.slot(buffer, peer) + piece.begin, bytes, device, stream);
        cuda::reduce(mine, mine, scratch, segment, dtype, op, device, stream);
      }
      if (op == ReduceOp::Avg) cuda::divide(mine, segment, dtype, static_cast<std::size_t>(n), device, stream);
      cuda::copy_async(arena.result(buffer) + piece.begin, mine, bytes, device, stream);
    }
    reduced.record(stream);
    std::uint64_t next = epoch;
    if (index + 1 < pieces) {
      next = arena.next_epoch();
      copy_out(index + 1, next);
    }
    reduced.synchronize();
    publish_and_wait(context, arena, Flag::Reduced, epoch);
    cuda::copy_async(piece.data, arena.result(buffer), piece.begin, device, stream);
    cuda::copy_async(piece.data + piece.end, arena.result(buffer) + piece.end, piece.total - piece.end, device, stream);
    epoch = next;
  }
}

}  // namespace comm::algorithms
