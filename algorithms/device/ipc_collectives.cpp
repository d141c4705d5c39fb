#include "algorithms/device/ipc_collectives.hpp"

#include <cstdint>
#include <cstring>

#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"

namespace comm::algorithms {
namespace {

// What a rank tells its peers at the start of each call.
struct Announcement {
  cuda::IpcMemoryHandle allocation;
  std::uint64_t offset;  // of the buffer inside the allocation
  cuda::IpcEventHandle events[2];
};

constexpr std::uint64_t kAnnounceStep = 0, kFinishedStep = 1;

// Sends `payload` to every peer and receives theirs into `incoming[peer]`, on one step.
template <class T>
void exchange_with_all(const CollectiveContext& context, const T& payload, std::vector<T>& incoming,
                       std::uint64_t step) {
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    int from = context.wrap(context.rank - offset), to = context.wrap(context.rank + offset);
    transfers.add(context.recv(from, &incoming[static_cast<std::size_t>(from)], sizeof(T), step), from, step);
    transfers.add(context.send(to, &payload, sizeof(T), step), to, step);
  }
  transfers.wait_all(context);
}

}  // namespace

// One call's frame (see the header): the constructor announces `buffer` and waits (on the
// stream) for the peers' buffers to be ready; finish() is the second hand-off.
class IpcCall {
 public:
  IpcCall(const CollectiveContext& context, IpcState& state, const void* buffer, void* stream)
      : context_(context), state_(state), stream_(stream), peers_(static_cast<std::size_t>(context.size), nullptr) {
    int device = state.device();
    cuda::AllocationRange range = cuda::allocation_range(buffer, device);
    Announcement mine{};
    mine.allocation = cuda::export_memory(range.base, device);
    mine.offset = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(buffer) -
                                             static_cast<const std::uint8_t*>(range.base));
    for (int phase = 0; phase < IpcState::kPhases; ++phase) {
      mine.events[phase] = state.own_[static_cast<std::size_t>(phase)]->handle();
    }
    state.own_[0]->record(stream);
    std::vector<Announcement> theirs(static_cast<std::size_t>(context.size));
    exchange_with_all(context, mine, theirs, kAnnounceStep);
    for (int peer = 0; peer < context.size; ++peer) {
      if (peer == context.rank) continue;
      auto p = static_cast<std::size_t>(peer);
      const Announcement& announcement = theirs[p];
      if (state.peers_[p].empty()) {  // first call: import the peer's events once
        for (int phase = 0; phase < IpcState::kPhases; ++phase) {
          state.peers_[p].push_back(std::make_unique<cuda::InterprocessEvent>(announcement.events[phase], device));
        }
      }
      peers_[p] =
          static_cast<std::uint8_t*>(state.opened_[p].open(announcement.allocation, device)) + announcement.offset;
      state.peers_[p][0]->wait(stream);
    }
  }

  // A peer's announced buffer, mapped here.
  std::uint8_t* peer(int rank) const { return peers_[static_cast<std::size_t>(rank)]; }

  void finish() {
    state_.own_[1]->record(stream_);
    std::uint8_t token = 0;
    std::vector<std::uint8_t> tokens(static_cast<std::size_t>(context_.size));
    exchange_with_all(context_, token, tokens, kFinishedStep);
    for (int peer = 0; peer < context_.size; ++peer) {
      if (peer != context_.rank) state_.peers_[static_cast<std::size_t>(peer)][1]->wait(stream_);
    }
  }

 private:
  const CollectiveContext& context_;
  IpcState& state_;
  void* stream_;
  std::vector<std::uint8_t*> peers_;
};

IpcState::IpcState(int device, int size)
    : device_(device), peers_(static_cast<std::size_t>(size)), opened_(static_cast<std::size_t>(size)) {
  for (int phase = 0; phase < kPhases; ++phase) own_.push_back(std::make_unique<cuda::InterprocessEvent>(device));
}

IpcState::~IpcState() = default;

void ipc_all_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                    ReduceOp op, void* stream) {
  int n = context.size, r = context.rank, device = state.device();
  if (n == 1 || count == 0) return;
  std::size_t element = element_size(dtype);
  IpcCall call(context, state, data, stream);
  auto begin = [&](int segment) { return count * static_cast<std::size_t>(segment) / static_cast<std::size_t>(n); };
  std::size_t offset = begin(r) * element, length = begin(r + 1) - begin(r);
  std::uint8_t* own = static_cast<std::uint8_t*>(data) + offset;
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) cuda::reduce(own, own, call.peer(peer) + offset, length, dtype, op, device, stream);
  }
  if (op == ReduceOp::Avg) cuda::divide(own, length, dtype, static_cast<std::size_t>(n), device, stream);
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) cuda::copy_async(call.peer(peer) + offset, own, length * element, device, stream);
  }
  call.finish();
}

void ipc_broadcast(const CollectiveContext& context, IpcState& state, void* data, std::size_t bytes, int root,
                   void* stream) {
  if (context.size == 1 || bytes == 0) return;
  IpcCall call(context, state, data, stream);
  if (context.rank != root) cuda::copy_async(data, call.peer(root), bytes, state.device(), stream);
  call.finish();
}

void ipc_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                ReduceOp op, int root, void* stream) {
  int n = context.size, device = state.device();
  if (n > 1 && count > 0) {
    IpcCall call(context, state, data, stream);
    if (context.rank == root) {
      for (int peer = 0; peer < n; ++peer) {
        if (peer != root) cuda::reduce(data, data, call.peer(peer), count, dtype, op, device, stream);
      }
    }
    call.finish();
  }
  if (op == ReduceOp::Avg && context.rank == root && n > 1) {
    cuda::divide(data, count, dtype, static_cast<std::size_t>(n), device, stream);
  }
}

void ipc_all_gather(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                    std::size_t block_bytes, void* stream) {
  int n = context.size, r = context.rank, device = state.device();
  auto* own_block = static_cast<std::uint8_t*>(output) + static_cast<std::size_t>(r) * block_bytes;
  if (block_bytes > 0 && own_block != input) cuda::copy_async(own_block, input, block_bytes, device, stream);
  if (n == 1 || block_bytes == 0) return;
  IpcCall call(context, state, output, stream);
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) {
      cuda::copy_async(call.peer(peer) + static_cast<std::size_t>(r) * block_bytes, own_block, block_bytes, device,
                       stream);
    }
  }
  call.finish();
}

void ipc_reduce_scatter(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                        std::size_t block_count, DType dtype, ReduceOp op, void* stream) {
  int n = context.size, r = context.rank, device = state.device();
  std::size_t block_bytes = block_count * element_size(dtype);
  const auto* own_block = static_cast<const std::uint8_t*>(input) + static_cast<std::size_t>(r) * block_bytes;
  if (block_count > 0 && own_block != output) cuda::copy_async(output, own_block, block_bytes, device, stream);
  if (n > 1 && block_count > 0) {
    IpcCall call(context, state, input, stream);
    for (int peer = 0; peer < n; ++peer) {
      if (peer != r) {
        cuda::reduce(output, output, call.peer(peer) + static_cast<std::size_t>(r) * block_bytes, block_count, dtype,
                     op, device, stream);
      }
    }
    call.finish();
  }
  if (op == ReduceOp::Avg && n > 1)
    cuda::divide(output, block_count, dtype, static_cast<std::size_t>(n), device, stream);
}

void ipc_gather(const CollectiveContext& context, IpcState& state, const void* input, std::size_t bytes,
                const std::vector<void*>& outputs, int root, void* stream) {
  int device = state.device();
  if (context.rank == root && bytes > 0 && outputs[static_cast<std::size_t>(root)] != input) {
    cuda::copy_async(outputs[static_cast<std::size_t>(root)], input, bytes, device, stream);
  }
  if (context.size == 1 || bytes == 0) return;
  IpcCall call(context, state, input, stream);
  if (context.rank == root) {
    for (int peer = 0; peer < context.size; ++peer) {
      if (peer != root)
        cuda::copy_async(outputs[static_cast<std::size_t>(peer)], call.peer(peer), bytes, device, stream);
    }
  }
  call.finish();
}

void ipc_scatter(const CollectiveContext& context, IpcState& state, void* output, std::size_t bytes,
                 const std::vector<const void*>& inputs, int root, void* stream) {
  int device = state.device();
  if (context.rank == root && bytes > 0 && inputs[static_cast<std::size_t>(root)] != output) {
    cuda::copy_async(output, inputs[static_cast<std::size_t>(root)], bytes, device, stream);
  }
  if (context.size == 1 || bytes == 0) return;
  IpcCall call(context, state, output, stream);
  if (context.rank == root) {
    for (int peer = 0; peer < context.size; ++peer) {
      if (peer != root)
        cuda::copy_async(call.peer(peer), inputs[static_cast<std::size_t>(peer)], bytes, device, stream);
    }
  }
  call.finish();
}

void ipc_all_to_all(const CollectiveContext& context, IpcState& state, void* output, const void* input,
                    std::size_t block_bytes, void* stream) {
  int n = context.size, r = context.rank, device = state.device();
  auto block = [&](int rank) { return static_cast<std::size_t>(rank) * block_bytes; };
  const auto* in = static_cast<const std::uint8_t*>(input);
  if (block_bytes > 0)
    cuda::copy_async(static_cast<std::uint8_t*>(output) + block(r), in + block(r), block_bytes, device, stream);
  if (n == 1 || block_bytes == 0) return;
  IpcCall call(context, state, output, stream);
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) cuda::copy_async(call.peer(peer) + block(r), in + block(peer), block_bytes, device, stream);
  }
  call.finish();
}

}  // namespace comm::algorithms
