#include "ipc_all_reduce.hpp"

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

constexpr std::uint64_t kAnnounceStep = 0, kPushedStep = 1;

// Sends `payload` to every peer and receives theirs into `incoming[peer]`, on one step.
template <class T>
void exchange_with_all(const CollectiveContext& context, const T& payload, std::vector<T>& incoming, std::uint64_t step) {
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    int from = context.wrap(context.rank - offset), to = context.wrap(context.rank + offset);
    transfers.add(context.recv(from, &incoming[static_cast<std::size_t>(from)], sizeof(T), step), from, step);
    transfers.add(context.send(to, &payload, sizeof(T), step), to, step);
  }
  transfers.wait_all(context);
}

}  // namespace

IpcState::IpcState(int device, int size)
    : device_(device), peers_(static_cast<std::size_t>(size)), opened_(static_cast<std::size_t>(size)) {
  for (int phase = 0; phase < kPhases; ++phase) own_.push_back(std::make_unique<cuda::InterprocessEvent>(device));
}

IpcState::~IpcState() = default;

void ipc_all_reduce(const CollectiveContext& context, IpcState& state, void* data, std::size_t count, DType dtype,
                    ReduceOp op, void* stream) {
  int n = context.size, device = state.device();
  std::size_t element = element_size(dtype);
  auto* bytes = static_cast<std::uint8_t*>(data);
  if (n == 1 || count == 0) return;

  // Phase 1: this rank's input is ready once the stream gets here; say where it lives.
  cuda::AllocationRange range = cuda::allocation_range(data, device);
  Announcement mine{};
  mine.allocation = cuda::export_memory(range.base, device);
  mine.offset = static_cast<std::uint64_t>(bytes - static_cast<std::uint8_t*>(range.base));
  for (int phase = 0; phase < IpcState::kPhases; ++phase) mine.events[phase] = state.own_[static_cast<std::size_t>(phase)]->handle();
  state.own_[0]->record(stream);
  std::vector<Announcement> theirs(static_cast<std::size_t>(n));
  exchange_with_all(context, mine, theirs, kAnnounceStep);

  std::vector<std::uint8_t*> peer_data(static_cast<std::size_t>(n), nullptr);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == context.rank) continue;
    auto p = static_cast<std::size_t>(peer);
    const Announcement& announcement = theirs[p];
    if (state.peers_[p].empty()) {  // first call: import the peer's events once
      for (int phase = 0; phase < IpcState::kPhases; ++phase) {
        state.peers_[p].push_back(std::make_unique<cuda::InterprocessEvent>(announcement.events[phase], device));
      }
    }
    std::vector<unsigned char> key(announcement.allocation.bytes.begin(), announcement.allocation.bytes.end());
    auto& opened = state.opened_[p][key];
    if (!opened) opened = std::make_unique<cuda::ImportedMemory>(announcement.allocation, device);
    peer_data[p] = static_cast<std::uint8_t*>(opened->data()) + announcement.offset;
    state.peers_[p][0]->wait(stream);
  }

  // Phase 2: reduce-scatter. Segment r = elements [count*r/n, count*(r+1)/n) is reduced here,
  // from every peer's buffer in rank order, so its owner alone computes it.
  auto segment_begin = [&](int segment) { return count * static_cast<std::size_t>(segment) / static_cast<std::size_t>(n); };
  auto segment_length = [&](int segment) { return segment_begin(segment + 1) - segment_begin(segment); };
  int r = context.rank;
  std::uint8_t* own_segment = bytes + segment_begin(r) * element;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    cuda::reduce(own_segment, own_segment, peer_data[static_cast<std::size_t>(peer)] + segment_begin(r) * element,
                 segment_length(r), dtype, op, device, stream);
  }
  if (op == ReduceOp::Avg) cuda::divide(own_segment, segment_length(r), dtype, static_cast<std::size_t>(n), device, stream);
  // Phase 3: all-gather by push: segment r into every peer's buffer.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    cuda::copy_async(peer_data[static_cast<std::size_t>(peer)] + segment_begin(r) * element, own_segment,
                     segment_length(r) * element, device, stream);
  }
  // The call completes on this rank once every peer has pushed its segment here.
  state.own_[1]->record(stream);
  std::uint8_t token = 0;
  std::vector<std::uint8_t> tokens(static_cast<std::size_t>(n));
  exchange_with_all(context, token, tokens, kPushedStep);
  for (int peer = 0; peer < n; ++peer) {
    if (peer != r) state.peers_[static_cast<std::size_t>(peer)][1]->wait(stream);
  }
}

}  // namespace comm::algorithms
