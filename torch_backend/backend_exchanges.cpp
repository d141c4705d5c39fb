// LibcommBackend's point-to-point operations and what torch builds from them: send and recv,
// all-to-all (equal blocks through libcomm's all_to_all, uneven ones through all_to_all_v on the
// host and as one exchange per peer on GPUs), barrier and torch's monitored barrier.
#include <algorithm>
#include <sstream>

#include "device_stream.hpp"
#include "libcomm_backend.hpp"
#include "tensor_buffers.hpp"

namespace torch_libcomm {

using comm::Operation;
namespace {

using c10d::OpType;

constexpr int kExchangeTagBase = 1 << 30;
constexpr int kExchangeTags = 1 << 20;
constexpr int kMonitoredArrivalTag = kExchangeTagBase + kExchangeTags;
constexpr int kMonitoredReleaseTag = kMonitoredArrivalTag + 1;

// Blocks of a flat tensor along its first dimension, `splits` rows each (empty: equal blocks).
std::vector<at::Tensor> blocks_of(const at::Tensor& tensor, const std::vector<int64_t>& splits, int size,
                                  const char* operation, const char* what) {
  std::vector<at::Tensor> blocks;
  if (splits.empty()) {
    TORCH_CHECK(tensor.dim() > 0 && tensor.size(0) % size == 0, "ProcessGroup libcomm: ", operation, ": the ", what,
                "'s first dimension must divide by the group size (", size, ")");
    int64_t rows = tensor.size(0) / size;
    for (int r = 0; r < size; ++r) blocks.push_back(tensor.narrow(0, r * rows, rows));
    return blocks;
  }
  check_list_size(splits.size(), size, operation, "the split sizes");
  int64_t first = 0;
  for (int64_t rows : splits) {
    TORCH_CHECK(rows >= 0 && first + rows <= tensor.size(0), "ProcessGroup libcomm: ", operation, ": the ", what,
                "'s split sizes run past its first dimension");
    blocks.push_back(tensor.narrow(0, first, rows));
    first += rows;
  }
  return blocks;
}

// Elements per block of a tensor along its first dimension, `splits` rows each (empty: equal
// blocks), checked as blocks_of checks them.
std::vector<std::size_t> counts_of(const at::Tensor& tensor, const std::vector<int64_t>& splits, int size,
                                   const char* operation, const char* what) {
  std::vector<std::size_t> counts;
  for (const auto& block : blocks_of(tensor, splits, size, operation, what)) {
    counts.push_back(static_cast<std::size_t>(block.numel()));
  }
  return counts;
}

// All-to-all with uneven blocks on GPUs: one send and one receive per peer (libcomm's all_to_all moves
// equal blocks); this rank's own block is copied. On tags from 2^30 up, which torch programs'
// own send/recv are not expected to use; `sequence` numbers the exchanges so that two in flight
// never match each other's messages.
WorkList exchange_blocks(comm::ProcessGroup& group, std::atomic<int>& sequence, const std::vector<at::Tensor>& sends,
                         const std::vector<at::Tensor>& receives, const char* operation) {
  int tag = kExchangeTagBase + (sequence.fetch_add(1) % kExchangeTags);
  WorkList works;
  for (int peer = 0; peer < group.size(); ++peer) {
    const auto& send = sends[static_cast<std::size_t>(peer)];
    const auto& receive = receives[static_cast<std::size_t>(peer)];
    if (peer == group.rank()) {
      TORCH_CHECK(send.numel() == receive.numel(), "ProcessGroup libcomm: ", operation,
                  ": this rank's block to itself differs in size on the two sides");
      receive.copy_(send);
      continue;
    }
    works.push_back(group.start({.operation = Operation::Recv,
                                 .output = buffer_of(receive, operation, "output tensor"),
                                 .root = peer,
                                 .tag = tag}));
  }
  for (int peer = 0; peer < group.size(); ++peer) {
    if (peer == group.rank()) continue;
    works.push_back(group.start({.operation = Operation::Send,
                                 .input = buffer_of(sends[static_cast<std::size_t>(peer)], operation, "input tensor"),
                                 .root = peer,
                                 .tag = tag}));
  }
  return works;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> LibcommBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                             std::vector<int64_t>& output_splits,
                                                             std::vector<int64_t>& input_splits,
                                                             const c10d::AllToAllOptions& options) {
  auto group = this->group("alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: alltoall_base: dtypes differ");
  order_on_current_stream(*group, "alltoall_base", output, input);
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(output.numel() == input.numel() && input.numel() % getSize() == 0,
                "ProcessGroup libcomm: alltoall_base: input and output must have the same size, a multiple of the "
                "group size");
    auto output_buffer = buffer_of(output, "alltoall_base", "output tensor");
    auto input_buffer = buffer_of(input, "alltoall_base", "input tensor");
    return works_.collective(
        OpType::ALLTOALL_BASE,
        {group->start({.operation = Operation::AllToAll, .output = output_buffer, .input = input_buffer})}, {output},
        {input}, options.timeout);
  }
  auto output_buffer = buffer_of(output, "alltoall_base", "output tensor");  // contiguous, of a known dtype
  auto input_buffer = buffer_of(input, "alltoall_base", "input tensor");
  if (input_buffer.device.kind != comm::Device::Kind::Cuda) {
    auto output_counts = counts_of(output, output_splits, getSize(), "alltoall_base", "output");
    auto input_counts = counts_of(input, input_splits, getSize(), "alltoall_base", "input");
    return works_.collective(OpType::ALLTOALL_BASE,
                             {group->start({.operation = Operation::AllToAllV,
                                            .output = output_buffer,
                                            .input = input_buffer,
                                            .input_counts = input_counts,
                                            .output_counts = output_counts})},
                             {output}, {input}, options.timeout);
  }
  auto sends = blocks_of(input, input_splits, getSize(), "alltoall_base", "input");
  auto receives = blocks_of(output, output_splits, getSize(), "alltoall_base", "output");
  return works_.collective(OpType::ALLTOALL_BASE,
                           exchange_blocks(*group, exchange_sequence_, sends, receives, "alltoall_base"), {output},
                           {input}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllToAllOptions& options) {
  auto group = this->group("alltoall");
  check_list_size(outputs.size(), getSize(), "alltoall", "the output list");
  check_list_size(inputs.size(), getSize(), "alltoall", "the input list");
  order_on_current_stream(*group, "alltoall", outputs, inputs);
  return works_.collective(OpType::ALLTOALL, exchange_blocks(*group, exchange_sequence_, inputs, outputs, "alltoall"),
                           outputs, inputs, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::send(std::vector<at::Tensor>& tensors, int destination, int tag) {
  auto group = this->group("send");
  check_single_tensor(tensors, "send");
  auto buffer = buffer_of(tensors[0], "send");
  order_on_current_stream(*group, "send", tensors);
  return works_.point_to_point(
      OpType::SEND, {group->start({.operation = Operation::Send, .input = buffer, .root = destination, .tag = tag})},
      {}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::recv(std::vector<at::Tensor>& tensors, int source, int tag) {
  auto group = this->group("recv");
  check_single_tensor(tensors, "recv");
  auto buffer = buffer_of(tensors[0], "recv");
  order_on_current_stream(*group, "recv", tensors);
  return works_.point_to_point(
      OpType::RECV, {group->start({.operation = Operation::Recv, .output = buffer, .root = source, .tag = tag})},
      tensors, {});
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  auto group = this->group("recv");
  check_single_tensor(tensors, "recv");
  auto buffer = buffer_of(tensors[0], "recv");
  order_on_current_stream(*group, "recv", tensors);
  return works_.point_to_point(
      OpType::RECVANYSOURCE,
      {group->start({.operation = Operation::Recv, .output = buffer, .root = comm::kAnySource, .tag = tag})}, tensors,
      {});
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::barrier(const c10d::BarrierOptions& options) {
  return works_.collective(OpType::BARRIER, {group("barrier")->start({.operation = Operation::Barrier})}, {}, {},
                           options.timeout);
}

// torch's monitored barrier, as Gloo does it: every rank reports to rank 0, which names the
// ranks that did not report within the timeout, then releases the others.
void LibcommBackend::monitoredBarrier(const c10d::BarrierOptions& options, bool wait_all_ranks) {
  auto group = this->group("monitored_barrier");
  auto timeout = options.timeout == c10d::kUnsetTimeout ? works_.timeout() : options.timeout;
  auto tokens = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(getSize()), 0);
  auto token = [&](int peer) { return comm::Buffer{tokens->data() + peer, 1, comm::DType::UInt8}; };
  // The backend keeps the bytes of a barrier that gave up: a late report or release may still
  // land in them.
  auto keep_tokens = [&] {
    std::lock_guard lock(monitored_tokens_mutex_);
    monitored_tokens_.push_back(tokens);
  };
  if (getRank() != 0) {
    group->isend(token(getRank()), 0, kMonitoredArrivalTag);
    if (!group->irecv(token(0), 0, kMonitoredReleaseTag)->wait_for(timeout)) {
      keep_tokens();
      TORCH_CHECK(false, "[Rank ", getRank(), "]: rank 0 did not release monitoredBarrier within ", timeout.count(),
                  " ms: rank 0, or a rank it waits for, has not reached it");
    }
    return;
  }
  WorkList arrivals(static_cast<std::size_t>(getSize()));
  for (int peer = 1; peer < getSize(); ++peer) arrivals[peer] = group->irecv(token(peer), peer, kMonitoredArrivalTag);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int peer = 1; peer < getSize(); ++peer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (arrivals[peer]->wait_for(std::max(left, std::chrono::milliseconds(0)))) continue;
    missing.push_back(peer);
    if (!wait_all_ranks) break;
  }
  if (!missing.empty()) {
    keep_tokens();
    std::ostringstream ranks;
    for (std::size_t i = 0; i < missing.size(); ++i) ranks << (i ? ", " : "") << missing[i];
    TORCH_CHECK(false, "[Rank 0]: ", missing.size() == 1 ? "Rank " : "Ranks ", ranks.str(),
                " failed to pass monitoredBarrier in ", timeout.count(), " ms");
  }
  WorkList releases;
  for (int peer = 1; peer < getSize(); ++peer) releases.push_back(group->isend(token(0), peer, kMonitoredReleaseTag));
  for (auto& release : releases) release->wait();
}

}  // namespace torch_libcomm
