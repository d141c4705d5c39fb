#include "libcomm_process_group.hpp"

#include <span>

#include "device_stream.hpp"
#include "libcomm_work.hpp"
#include "tensor_buffers.hpp"

namespace torch_libcomm {
namespace {

using c10d::OpType;
using WorkList = std::vector<std::shared_ptr<comm::Work>>;

constexpr int kExchangeTagBase = 1 << 30;

std::vector<comm::Buffer> buffers_of(const std::vector<at::Tensor>& tensors, const char* operation, const char* what) {
  std::vector<comm::Buffer> buffers;
  buffers.reserve(tensors.size());
  for (const auto& tensor : tensors) buffers.push_back(buffer_of(tensor, operation, what));
  return buffers;
}

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

}  // namespace

LibcommProcessGroup::LibcommProcessGroup(std::shared_ptr<comm::ProcessGroup> group)
    : c10d::ProcessGroup(group->rank(), group->size()), group_(std::move(group)) {}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::make_work(OpType type, WorkList works,
                                                              std::vector<at::Tensor> outputs,
                                                              std::vector<at::Tensor> keep_alive) {
  return c10::make_intrusive<LibcommWork>(rank_, type, std::move(works), std::move(outputs), std::move(keep_alive));
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& options) {
  check_single_tensor(tensors, "broadcast");
  auto buffer = buffer_of(tensors[0], "broadcast");
  order_on_current_stream(*group_, "broadcast", tensors);
  return make_work(OpType::BROADCAST, {group_->ibroadcast(buffer, static_cast<int>(options.rootRank))}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& options) {
  check_single_tensor(tensors, "allreduce");
  auto buffer = buffer_of(tensors[0], "allreduce");
  auto op = reduce_op_of(options.reduceOp, "allreduce");
  order_on_current_stream(*group_, "allreduce", tensors);
  return make_work(OpType::ALLREDUCE, {group_->iall_reduce(buffer, op)}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& options) {
  TORCH_CHECK(!tensors.empty(), "ProcessGroup libcomm: allreduce_coalesced needs at least one tensor");
  auto op = reduce_op_of(options.reduceOp, "allreduce_coalesced");
  auto buffers = buffers_of(tensors, "allreduce_coalesced", "tensor");
  order_on_current_stream(*group_, "allreduce_coalesced", tensors);
  WorkList works;
  for (auto& buffer : buffers) works.push_back(group_->iall_reduce(buffer, op));
  return make_work(OpType::ALLREDUCE_COALESCED, std::move(works), tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& options) {
  check_single_tensor(tensors, "reduce");
  auto buffer = buffer_of(tensors[0], "reduce");
  auto op = reduce_op_of(options.reduceOp, "reduce");
  order_on_current_stream(*group_, "reduce", tensors);
  return make_work(OpType::REDUCE, {group_->ireduce(buffer, static_cast<int>(options.rootRank), op)}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllgatherOptions&) {
  check_single_tensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "ProcessGroup libcomm: allgather takes a single list of output tensors");
  check_list_size(outputs[0].size(), getSize(), "allgather", "the output list");
  check_same_type_and_size(inputs[0], outputs[0], "allgather");
  auto input = buffer_of(inputs[0], "allgather", "input tensor");
  auto output_buffers = buffers_of(outputs[0], "allgather", "output tensor");
  order_on_current_stream(*group_, "allgather", outputs, inputs);
  return make_work(OpType::ALLGATHER, {group_->iall_gather(std::span(output_buffers), input)}, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::AllgatherOptions&) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: _allgather_base: dtypes differ");
  TORCH_CHECK(output.numel() == input.numel() * getSize(),
              "ProcessGroup libcomm: _allgather_base: the output must "
              "hold the group size times the input's elements");
  auto output_buffer = buffer_of(output, "_allgather_base", "output tensor");
  auto input_buffer = buffer_of(input, "_allgather_base", "input tensor");
  order_on_current_stream(*group_, "_allgather_base", output, input);
  return make_work(OpType::_ALLGATHER_BASE, {group_->iall_gather(output_buffer, input_buffer)}, {output});
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                        std::vector<at::Tensor>& inputs,
                                                                        const c10d::AllgatherOptions&) {
  // outputs[r][i]: input i of rank r.
  check_list_size(outputs.size(), getSize(), "allgather_coalesced", "the output lists");
  order_on_current_stream(*group_, "allgather_coalesced", outputs, inputs);
  WorkList works;
  std::vector<at::Tensor> flat_outputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> of_input;
    for (auto& list : outputs) {
      TORCH_CHECK(list.size() == inputs.size(),
                  "ProcessGroup libcomm: allgather_coalesced: every output list "
                  "must hold one tensor per input");
      of_input.push_back(list[i]);
    }
    check_same_type_and_size(inputs[i], of_input, "allgather_coalesced");
    auto output_buffers = buffers_of(of_input, "allgather_coalesced", "output tensor");
    works.push_back(group_->iall_gather(std::span(output_buffers), buffer_of(inputs[i], "allgather_coalesced")));
    flat_outputs.insert(flat_outputs.end(), of_input.begin(), of_input.end());
  }
  return make_work(OpType::ALLGATHER_COALESCED, std::move(works), std::move(flat_outputs));
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::GatherOptions& options) {
  check_single_tensor(inputs, "gather");
  int root = static_cast<int>(options.rootRank);
  std::vector<comm::Buffer> output_buffers;
  std::vector<at::Tensor> results;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1, "ProcessGroup libcomm: gather takes a single list of output tensors on the root");
    check_list_size(outputs[0].size(), getSize(), "gather", "the root's output list");
    check_same_type_and_size(inputs[0], outputs[0], "gather");
    output_buffers = buffers_of(outputs[0], "gather", "output tensor");
    results = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty(), "ProcessGroup libcomm: gather: only the root passes output tensors");
  }
  auto input = buffer_of(inputs[0], "gather", "input tensor");
  order_on_current_stream(*group_, "gather", outputs, inputs);
  return make_work(OpType::GATHER, {group_->igather(input, std::span(output_buffers), root)}, std::move(results),
                   inputs);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ScatterOptions& options) {
  check_single_tensor(outputs, "scatter");
  int root = static_cast<int>(options.rootRank);
  std::vector<comm::Buffer> input_buffers;
  std::vector<at::Tensor> keep_alive;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1, "ProcessGroup libcomm: scatter takes a single list of input tensors on the root");
    check_list_size(inputs[0].size(), getSize(), "scatter", "the root's input list");
    check_same_type_and_size(outputs[0], inputs[0], "scatter");
    input_buffers = buffers_of(inputs[0], "scatter", "input tensor");
    keep_alive = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty(), "ProcessGroup libcomm: scatter: only the root passes input tensors");
  }
  auto output = buffer_of(outputs[0], "scatter", "output tensor");
  order_on_current_stream(*group_, "scatter", outputs, inputs);
  std::span<const comm::Buffer> sources(input_buffers);
  return make_work(OpType::SCATTER, {group_->iscatter(output, sources, root)}, outputs, std::move(keep_alive));
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                                   const c10d::ReduceScatterOptions& options) {
  check_single_tensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "ProcessGroup libcomm: reduce_scatter takes a single list of input tensors");
  check_list_size(inputs[0].size(), getSize(), "reduce_scatter", "the input list");
  check_same_type_and_size(outputs[0], inputs[0], "reduce_scatter");
  auto op = reduce_op_of(options.reduceOp, "reduce_scatter");
  order_on_current_stream(*group_, "reduce_scatter", outputs, inputs);
  // libcomm reduces one flat input of size() blocks: the list is copied into one.
  std::vector<at::Tensor> flat_parts;
  for (const auto& input : inputs[0]) flat_parts.push_back(input.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  auto output = buffer_of(outputs[0], "reduce_scatter", "output tensor");
  auto input = buffer_of(flat, "reduce_scatter", "input tensor");
  return make_work(OpType::REDUCE_SCATTER, {group_->ireduce_scatter(output, input, op)}, outputs, {flat});
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                         const c10d::ReduceScatterOptions& options) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: _reduce_scatter_base: dtypes differ");
  TORCH_CHECK(input.numel() == output.numel() * getSize(),
              "ProcessGroup libcomm: _reduce_scatter_base: the input "
              "must hold the group size times the output's elements");
  auto op = reduce_op_of(options.reduceOp, "_reduce_scatter_base");
  auto output_buffer = buffer_of(output, "_reduce_scatter_base", "output tensor");
  auto input_buffer = buffer_of(input, "_reduce_scatter_base", "input tensor");
  order_on_current_stream(*group_, "_reduce_scatter_base", output, input);
  return make_work(OpType::_REDUCE_SCATTER_BASE, {group_->ireduce_scatter(output_buffer, input_buffer, op)}, {output},
                   {input});
}

std::vector<std::shared_ptr<comm::Work>> LibcommProcessGroup::exchange_blocks(const std::vector<at::Tensor>& sends,
                                                                              const std::vector<at::Tensor>& receives,
                                                                              const char* operation) {
  int tag = kExchangeTagBase + (exchange_sequence_.fetch_add(1) % (1 << 20));
  WorkList works;
  for (int peer = 0; peer < getSize(); ++peer) {
    const auto& send = sends[static_cast<std::size_t>(peer)];
    const auto& receive = receives[static_cast<std::size_t>(peer)];
    if (peer == getRank()) {
      TORCH_CHECK(send.numel() == receive.numel(), "ProcessGroup libcomm: ", operation,
                  ": this rank's block to itself differs in size on the two sides");
      receive.copy_(send);
      continue;
    }
    works.push_back(group_->irecv(buffer_of(receive, operation, "output tensor"), peer, tag));
  }
  for (int peer = 0; peer < getSize(); ++peer) {
    if (peer == getRank()) continue;
    works.push_back(
        group_->isend(buffer_of(sends[static_cast<std::size_t>(peer)], operation, "input tensor"), peer, tag));
  }
  return works;
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                  std::vector<int64_t>& output_splits,
                                                                  std::vector<int64_t>& input_splits,
                                                                  const c10d::AllToAllOptions&) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: alltoall_base: dtypes differ");
  order_on_current_stream(*group_, "alltoall_base", output, input);
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(output.numel() == input.numel() && input.numel() % getSize() == 0,
                "ProcessGroup libcomm: "
                "alltoall_base: input and output must have the same size, a multiple of the group size");
    auto output_buffer = buffer_of(output, "alltoall_base", "output tensor");
    auto input_buffer = buffer_of(input, "alltoall_base", "input tensor");
    return make_work(OpType::ALLTOALL_BASE, {group_->iall_to_all(output_buffer, input_buffer)}, {output}, {input});
  }
  buffer_of(output, "alltoall_base", "output tensor");  // contiguous, of a known dtype
  buffer_of(input, "alltoall_base", "input tensor");
  auto sends = blocks_of(input, input_splits, getSize(), "alltoall_base", "input");
  auto receives = blocks_of(output, output_splits, getSize(), "alltoall_base", "output");
  return make_work(OpType::ALLTOALL_BASE, exchange_blocks(sends, receives, "alltoall_base"), {output}, {input});
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions&) {
  check_list_size(outputs.size(), getSize(), "alltoall", "the output list");
  check_list_size(inputs.size(), getSize(), "alltoall", "the input list");
  order_on_current_stream(*group_, "alltoall", outputs, inputs);
  return make_work(OpType::ALLTOALL, exchange_blocks(inputs, outputs, "alltoall"), outputs, inputs);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::send(std::vector<at::Tensor>& tensors, int destination, int tag) {
  check_single_tensor(tensors, "send");
  auto buffer = buffer_of(tensors[0], "send");
  order_on_current_stream(*group_, "send", tensors);
  return make_work(OpType::SEND, {group_->isend(buffer, destination, tag)}, {}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::recv(std::vector<at::Tensor>& tensors, int source, int tag) {
  check_single_tensor(tensors, "recv");
  auto buffer = buffer_of(tensors[0], "recv");
  order_on_current_stream(*group_, "recv", tensors);
  return make_work(OpType::RECV, {group_->irecv(buffer, source, tag)}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  check_single_tensor(tensors, "recv");
  auto buffer = buffer_of(tensors[0], "recv");
  order_on_current_stream(*group_, "recv", tensors);
  return make_work(OpType::RECVANYSOURCE, {group_->irecv(buffer, comm::kAnySource, tag)}, tensors);
}

c10::intrusive_ptr<c10d::Work> LibcommProcessGroup::barrier(const c10d::BarrierOptions&) {
  return make_work(OpType::BARRIER, {group_->ibarrier()}, {});
}

}  // namespace torch_libcomm
