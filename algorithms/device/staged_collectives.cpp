#include "algorithms/device/staged_collectives.hpp"

#include <cstdint>

#include "algorithms/chunking.hpp"
#include "algorithms/direct.hpp"
#include "algorithms/ring.hpp"
#include "cuda/reduce.hpp"

namespace comm::algorithms {

std::uint8_t* StagingState::host(int slot, std::size_t bytes) {
  cuda::PinnedMemory& held = host_.at(static_cast<std::size_t>(slot));
  if (held.bytes() < bytes) {
    held = cuda::PinnedMemory();  // free first: pinned memory is scarce
    held = cuda::PinnedMemory(bytes);
  }
  return static_cast<std::uint8_t*>(held.data());
}

std::uint8_t* StagingState::device_scratch(int slot, std::size_t bytes) {
  cuda::DeviceMemory& held = device_scratch_.at(static_cast<std::size_t>(slot));
  if (held.bytes() < bytes) {
    held = cuda::DeviceMemory();
    held = cuda::DeviceMemory(bytes, device_);
  }
  return static_cast<std::uint8_t*>(held.data());
}

const cuda::Event& StagingState::event(std::size_t index) {
  while (events_.size() <= index) events_.push_back(std::make_unique<cuda::Event>(device_));
  return *events_[index];
}

void* StagingState::side_stream() {
  if (!side_stream_) side_stream_ = std::make_unique<cuda::Stream>(device_);
  return side_stream_->handle();
}

namespace {

// Steps [0, last) of the ring of ring.hpp over device memory `data`, staged: last = 2n-2 is an
// all_reduce, n-1 a reduce_scatter (segment `rank` reduced, the others partial).
//   - `mirror` (pinned, as large as data) holds what is sent: the first step's segment copied
//     out of data, then each segment as it leaves the GPU reduced, then the all-gather's
//     segments as they arrive;
//   - reduce-scatter chunks arrive in pinned slots, go to device slots and are reduced there.
// The host waits for a chunk's event only before sending bytes the GPU produced, and waits for
// chunk c while chunk c+1's copies and reduction are already queued behind it.
void staged_ring(const CollectiveContext& context, StagingState& state, std::uint8_t* data, std::size_t count,
                 DType dtype, ReduceOp op, int last, void* stream, std::size_t chunk_bytes) {
  int n = context.size, device = state.device();
  if (n == 1 || count == 0) return;
  std::size_t element = element_size(dtype);
  RingLayout ring(context, count, element, chunk_bytes, static_cast<std::size_t>(last));
  std::size_t chunks = ring.chunks, slot_bytes = ring.slot_bytes;
  int next = context.wrap(context.rank + 1), previous = context.wrap(context.rank - 1);
  std::uint8_t* mirror = state.host(0, count * element);
  std::uint8_t* incoming = state.host(1, slot_bytes * chunks);
  std::uint8_t* staged = state.device_scratch(0, slot_bytes * chunks);

  std::vector<Transfer> receives(chunks);
  TransferSet sends;
  auto post = [&](int step, std::size_t chunk) {
    auto [receive_offset, receive_bytes] = ring.chunk_of(ring.receive_segment(step), chunk);
    std::uint8_t* into = step < n - 1 ? incoming + chunk * slot_bytes : mirror + receive_offset;
    receives[chunk] = context.recv(previous, into, receive_bytes, ring.tag(step, chunk));
    auto [send_offset, send_bytes] = ring.chunk_of(ring.send_segment(step), chunk);
    sends.add(context.send(next, mirror + send_offset, send_bytes, ring.tag(step, chunk)), next, ring.tag(step, chunk));
  };
  // The GPU work of `chunk` queued at `step` has recorded its event: once it has run, the chunk
  // may leave (and its pinned slot be reused).
  auto release = [&](int step, std::size_t chunk) {
    state.event(chunk).synchronize();
    if (step + 1 < last) post(step + 1, chunk);
  };

  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    auto [offset, bytes] = ring.chunk_of(ring.send_segment(0), chunk);
    cuda::copy_async(mirror + offset, data + offset, bytes, device, stream);
    state.event(chunk).record(stream);
  }
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    state.event(chunk).synchronize();
    post(0, chunk);
  }
  for (int step = 0; step < last; ++step) {
    bool reducing = step < n - 1;
    std::size_t queued = chunks;  // a chunk whose GPU work is queued and not yet released
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
      context.wait(receives[chunk], previous, ring.tag(step, chunk));
      auto [offset, bytes] = ring.chunk_of(ring.receive_segment(step), chunk);
      if (!reducing) {  // all-gather: the owner's bytes go to the GPU and on round the ring
        cuda::copy_async(data + offset, mirror + offset, bytes, device, stream);
        if (step + 1 < last) post(step + 1, chunk);
        continue;
      }
      std::size_t elements = bytes / element;
      std::uint8_t* slot = staged + chunk * slot_bytes;
      cuda::copy_async(slot, incoming + chunk * slot_bytes, bytes, device, stream);
      cuda::reduce(data + offset, data + offset, slot, elements, dtype, op, device, stream);
      // The owner finishes an average once, so every rank receives the same divided bytes.
      if (step == n - 2 && op == ReduceOp::Avg)
        cuda::divide(data + offset, elements, dtype, static_cast<std::size_t>(n), device, stream);
      if (step + 1 < last) cuda::copy_async(mirror + offset, data + offset, bytes, device, stream);
      state.event(chunk).record(stream);
      if (queued < chunks) release(step, queued);
      queued = chunk;
    }
    if (queued < chunks) release(step, queued);
  }
  sends.wait_all(context);
}

// The host waits until `stream` has run what is queued on it (e.g. copies it is about to send).
void host_waits_for(StagingState& state, void* stream) {
  state.event(0).record(stream);
  state.event(0).synchronize();
}

// Device memory copied to pinned memory, for the host to send from.
void copy_out(StagingState& state, void* host, const void* device_data, std::size_t bytes, void* stream) {
  cuda::copy_async(host, device_data, bytes, state.device(), stream);
  host_waits_for(state, stream);
}

}  // namespace

void staged_all_reduce(const CollectiveContext& context, StagingState& state, void* data, std::size_t count,
                       DType dtype, ReduceOp op, void* stream, std::size_t chunk_bytes) {
  staged_ring(context, state, static_cast<std::uint8_t*>(data), count, dtype, op, 2 * context.size - 2, stream,
              chunk_bytes);
}

void staged_reduce_scatter(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                           std::size_t block_count, DType dtype, ReduceOp op, void* stream, std::size_t chunk_bytes) {
  int n = context.size, device = state.device();
  std::size_t block_bytes = block_count * element_size(dtype), total = block_bytes * static_cast<std::size_t>(n);
  const auto* own_block =
      static_cast<const std::uint8_t*>(input) + static_cast<std::size_t>(context.rank) * block_bytes;
  if (block_count == 0) return;
  if (n == 1) {
    if (own_block != output) cuda::copy_async(output, own_block, block_bytes, device, stream);
    return;
  }
  // The ring reduces in place (an in-place call's other blocks end partially reduced, as on the
  // host); an out-of-place call reduces a copy of the input in device scratch.
  auto* data = const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(input));
  if (own_block != output) {
    data = state.device_scratch(1, total);
    cuda::copy_async(data, input, total, device, stream);
  }
  staged_ring(context, state, data, block_count * static_cast<std::size_t>(n), dtype, op, n - 1, stream, chunk_bytes);
  std::uint8_t* reduced = data + static_cast<std::size_t>(context.rank) * block_bytes;
  if (reduced != output) cuda::copy_async(output, reduced, block_bytes, device, stream);
}

void staged_reduce(const CollectiveContext& context, StagingState& state, void* data, std::size_t count, DType dtype,
                   ReduceOp op, int root, void* stream) {
  int n = context.size, device = state.device();
  std::size_t bytes = count * element_size(dtype);
  if (n == 1 || count == 0) return;
  if (context.rank != root) {
    std::uint8_t* host = state.host(0, bytes);
    copy_out(state, host, data, bytes, stream);
    context.send_wait(root, host, bytes, 0);
    return;
  }
  // Peers arrive into two pinned buffers in turn; each is copied to the GPU and reduced there
  // while the next one is on the wire.
  std::vector<int> peers;
  for (int offset = 1; offset < n; ++offset) peers.push_back(context.wrap(root + offset));
  std::uint8_t* host[2] = {state.host(1, bytes), state.host(2, bytes)};
  std::uint8_t* staged = state.device_scratch(0, 2 * bytes);
  Transfer receives[2];
  auto post = [&](std::size_t i) { receives[i % 2] = context.recv(peers[i], host[i % 2], bytes, 0); };
  for (std::size_t i = 0; i < peers.size() && i < 2; ++i) post(i);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    context.wait(receives[i % 2], peers[i], 0);
    std::uint8_t* slot = staged + (i % 2) * bytes;
    cuda::copy_async(slot, host[i % 2], bytes, device, stream);
    cuda::reduce(data, data, slot, count, dtype, op, device, stream);
    state.event(i % 2).record(stream);
    if (i + 2 < peers.size()) {
      state.event(i % 2).synchronize();
      post(i + 2);
    }
  }
  if (op == ReduceOp::Avg) cuda::divide(data, count, dtype, static_cast<std::size_t>(n), device, stream);
}

void staged_broadcast(const CollectiveContext& context, StagingState& state, void* data, std::size_t bytes, int root,
                      void* stream, std::size_t chunk_bytes) {
  if (context.size == 1 || bytes == 0) return;
  std::uint8_t* host = state.host(0, bytes);
  if (context.rank == root) copy_out(state, host, data, bytes, stream);
  ring_broadcast(context, host, bytes, root, chunk_bytes);
  if (context.rank != root) cuda::copy_async(data, host, bytes, state.device(), stream);
}

namespace {

// Every rank's block gathered into pinned memory (block r at r x block_bytes); null when there
// is nothing to move between ranks.
std::uint8_t* gather_on_host(const CollectiveContext& context, StagingState& state, const void* input,
                             std::size_t block_bytes, void* stream, std::size_t chunk_bytes) {
  auto n = static_cast<std::size_t>(context.size), own = static_cast<std::size_t>(context.rank) * block_bytes;
  if (n == 1 || block_bytes == 0) return nullptr;
  std::uint8_t* host = state.host(0, block_bytes * n);
  copy_out(state, host + own, input, block_bytes, stream);
  ring_all_gather(context, host, block_bytes, chunk_bytes);
  return host;
}

}  // namespace

void staged_all_gather(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                       std::size_t block_bytes, void* stream, std::size_t chunk_bytes) {
  auto n = static_cast<std::size_t>(context.size);
  if (std::uint8_t* host = gather_on_host(context, state, input, block_bytes, stream, chunk_bytes)) {
    cuda::copy_async(output, host, block_bytes * n, state.device(), stream);
  } else if (block_bytes > 0 && output != input) {
    cuda::copy_async(output, input, block_bytes, state.device(), stream);
  }
}

void staged_all_gather(const CollectiveContext& context, StagingState& state, const std::vector<void*>& outputs,
                       const void* input, std::size_t block_bytes, void* stream, std::size_t chunk_bytes) {
  std::uint8_t* host = gather_on_host(context, state, input, block_bytes, stream, chunk_bytes);
  for (std::size_t r = 0; r < outputs.size() && block_bytes > 0; ++r) {
    bool own = r == static_cast<std::size_t>(context.rank);
    if (own && outputs[r] != input) cuda::copy_async(outputs[r], input, block_bytes, state.device(), stream);
    if (!own) cuda::copy_async(outputs[r], host + r * block_bytes, block_bytes, state.device(), stream);
  }
}

void staged_gather(const CollectiveContext& context, StagingState& state, const void* input, std::size_t bytes,
                   const std::vector<void*>& outputs, int root, void* stream) {
  int device = state.device();
  auto n = static_cast<std::size_t>(context.size), r = static_cast<std::size_t>(root);
  if (context.rank == root && bytes > 0 && outputs[r] != input)
    cuda::copy_async(outputs[r], input, bytes, device, stream);
  if (n == 1 || bytes == 0) return;
  std::uint8_t* host = state.host(0, bytes * n);
  if (context.rank != root) {
    copy_out(state, host, input, bytes, stream);
    direct_gather(context, host, bytes, {}, root);
    return;
  }
  std::vector<void*> blocks;
  for (std::size_t peer = 0; peer < n; ++peer) blocks.push_back(host + peer * bytes);
  // The root's own block is on the GPU already: handing the gather its slot as the input
  // leaves nothing to copy.
  direct_gather(context, blocks[r], bytes, blocks, root);
  for (std::size_t peer = 0; peer < n; ++peer) {
    if (peer != r) cuda::copy_async(outputs[peer], blocks[peer], bytes, device, stream);
  }
}

void staged_scatter(const CollectiveContext& context, StagingState& state, void* output, std::size_t bytes,
                    const std::vector<const void*>& inputs, int root, void* stream) {
  int device = state.device();
  auto n = static_cast<std::size_t>(context.size), r = static_cast<std::size_t>(root);
  if (context.rank == root && bytes > 0 && inputs[r] != output)
    cuda::copy_async(output, inputs[r], bytes, device, stream);
  if (n == 1 || bytes == 0) return;
  std::uint8_t* host = state.host(0, bytes * n);
  if (context.rank != root) {
    direct_scatter(context, host, bytes, {}, root);
    cuda::copy_async(output, host, bytes, device, stream);
    return;
  }
  std::vector<const void*> blocks;
  for (std::size_t peer = 0; peer < n; ++peer) {
    blocks.push_back(host + peer * bytes);
    if (peer != r) cuda::copy_async(host + peer * bytes, inputs[peer], bytes, device, stream);
  }
  host_waits_for(state, stream);
  direct_scatter(context, host + r * bytes, bytes, blocks, root);
}

void staged_all_to_all(const CollectiveContext& context, StagingState& state, void* output, const void* input,
                       std::size_t block_bytes, void* stream) {
  int device = state.device();
  auto n = static_cast<std::size_t>(context.size);
  if (block_bytes == 0) return;
  // Separate pinned buffers in and out, so an in-place call needs nothing more.
  std::uint8_t* host_in = state.host(0, block_bytes * n);
  std::uint8_t* host_out = state.host(1, block_bytes * n);
  copy_out(state, host_in, input, block_bytes * n, stream);
  direct_all_to_all(context, host_out, host_in, block_bytes);
  cuda::copy_async(output, host_out, block_bytes * n, device, stream);
}

}  // namespace comm::algorithms
