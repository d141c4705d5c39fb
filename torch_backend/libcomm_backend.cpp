#include "libcomm_backend.hpp"

#include <algorithm>
#include <span>

#include "device_stream.hpp"
#include "tensor_buffers.hpp"
#include "world_group.hpp"

namespace torch_libcomm {

using comm::Operation;
namespace {

using c10d::OpType;

std::vector<comm::Buffer> buffers_of(const std::vector<at::Tensor>& tensors, const char* operation, const char* what) {
  std::vector<comm::Buffer> buffers;
  buffers.reserve(tensors.size());
  for (const auto& tensor : tensors) buffers.push_back(buffer_of(tensor, operation, what));
  return buffers;
}

void check_list_pairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                      const char* operation) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroup libcomm: ", operation, ": ", outputs.size(),
              " output tensors for ", inputs.size(), " inputs; pass one output per input");
}

}  // namespace

LibcommBackend::LibcommBackend(std::shared_ptr<comm::ProcessGroup> group, std::chrono::milliseconds timeout)
    : c10d::Backend(group->rank(), group->size()),
      group_(std::move(group)),
      works_(getRank(), group_->timeout(), timeout) {
  init();  // what torch asks of every Backend (its usage logging)
}

std::shared_ptr<comm::ProcessGroup> LibcommBackend::group(const char* operation) const {
  std::lock_guard lock(group_mutex_);
  TORCH_CHECK(group_ != nullptr, "ProcessGroup libcomm: ", operation,
              " on a process group that was shut down; make a new one with new_group or init_process_group");
  return group_;
}

c10::intrusive_ptr<c10d::Backend::Options> LibcommBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("libcomm", works_.timeout());
  options->group_name = getGroupUid();
  options->group_desc = getGroupDesc();
  return options;
}

void LibcommBackend::setTimeout(std::chrono::milliseconds timeout) { works_.set_timeout(timeout); }

void LibcommBackend::setSequenceNumberForGroup() { works_.reset_sequence(); }

uint64_t LibcommBackend::getSequenceNumberForGroup() { return works_.sequence(); }

void LibcommBackend::startCoalescing() { works_.start_coalescing(); }

c10::intrusive_ptr<c10d::Work> LibcommBackend::endCoalescing() { return works_.end_coalescing(); }

// torch calls split on every rank of this group, each with the sorted ranks of its own part;
// the part is a libcomm subgroup over this group's connections, keyed by torch's group name.
c10::intrusive_ptr<c10d::Backend> LibcommBackend::split(const c10::intrusive_ptr<c10d::Store>&,
                                                        const std::vector<int>& ranks,
                                                        const c10::intrusive_ptr<Options>& options) {
  if (std::find(ranks.begin(), ranks.end(), getRank()) == ranks.end()) return nullptr;
  auto timeout = options ? options->timeout : works_.timeout();
  std::string key =
      "torch-split/" +
      (options && !options->group_name.empty() ? options->group_name : std::to_string(split_count_.fetch_add(1)));
  // torch asks each device's backend to split; one libcomm backend serving CPU and CUDA is
  // asked twice, and gives the same part both times.
  std::lock_guard lock(splits_mutex_);
  if (auto found = splits_.find(key); found != splits_.end()) {
    if (auto made = found->second.lock()) return made;
  }
  auto part = group("split")->new_group(ranks, key, timeout);
  auto backend = c10::make_intrusive<LibcommBackend>(std::move(part), timeout);
  if (options) backend->setGroupUid(options->group_name);
  splits_.insert_or_assign(key, c10::weak_intrusive_ptr<LibcommBackend>(backend));
  return backend;
}

// torch.distributed.shrink_group: every survivor calls it with the same ranks to leave out (the
// dead never do); libcomm's shrink revokes this group first (so SHRINK_DEFAULT and SHRINK_ABORT
// behave alike: nothing pending here is left waiting) and the survivors agree on who is out.
// torch numbers the new group from its own list, so survivors that found another rank dead too
// get an error naming it, rather than a group torch numbers otherwise.
c10::intrusive_ptr<c10d::Backend> LibcommBackend::shrink(const std::vector<int64_t>& ranks_to_exclude, int,
                                                         const c10::intrusive_ptr<Options>& options) {
  std::vector<int> exclude(ranks_to_exclude.begin(), ranks_to_exclude.end());
  int expected = getSize() - static_cast<int>(exclude.size());
  auto shrunk = shrunk_group(std::move(exclude));
  TORCH_CHECK(shrunk->size() == expected, "ProcessGroup libcomm: shrink: the ", shrunk->size(),
              " survivors also found dead a rank not in ranks_to_exclude (", expected,
              " were expected); call shrink_group again listing it");
  auto timeout = options ? options->timeout : works_.timeout();
  return c10::make_intrusive<LibcommBackend>(std::move(shrunk), timeout);
}

std::pair<c10::intrusive_ptr<LibcommBackend>, std::vector<int>> LibcommBackend::shrink_to_survivors(
    std::vector<int> exclude) {
  auto shrunk = shrunk_group(std::move(exclude));
  // Who is left, in this group's numbers: torch maps ranks through them.
  std::vector<int> survivors(static_cast<std::size_t>(shrunk->size()));
  int mine = getRank();
  shrunk->all_gather(comm::Buffer(survivors.data(), survivors.size(), comm::DType::Int32),
                     comm::Buffer(&mine, 1, comm::DType::Int32));
  return {c10::make_intrusive<LibcommBackend>(std::move(shrunk), works_.timeout()), std::move(survivors)};
}

std::shared_ptr<comm::ProcessGroup> LibcommBackend::shrunk_group(std::vector<int> exclude) {
  auto old = group("shrink");
  auto shrunk = old->shrink(std::move(exclude));
  succeed_world_group(*old, shrunk);
  return shrunk;
}

c10::intrusive_ptr<LibcommBackend> LibcommBackend::grow(int count) {
  auto old = group("grow");
  auto grown = old->grow(count);
  succeed_world_group(*old, grown);
  return c10::make_intrusive<LibcommBackend>(std::move(grown), works_.timeout());
}

void LibcommBackend::abort() {
  std::lock_guard lock(group_mutex_);
  if (group_) group_->abort();
}

void LibcommBackend::shutdown() {
  std::shared_ptr<comm::ProcessGroup> ending;
  {
    std::lock_guard lock(group_mutex_);
    ending = std::move(group_);
  }
  // Destroyed here, outside the lock, unless a subgroup or an unfinished Work still holds it.
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                         const c10d::BroadcastOptions& options) {
  auto group = this->group("broadcast");
  check_single_tensor(tensors, "broadcast");
  auto buffer = buffer_of(tensors[0], "broadcast");
  order_on_current_stream(*group, "broadcast", tensors);
  return works_.collective(
      OpType::BROADCAST,
      {group->start({.operation = Operation::Broadcast, .output = buffer, .root = static_cast<int>(options.rootRank)})},
      tensors, {}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& options) {
  auto group = this->group("allreduce");
  check_single_tensor(tensors, "allreduce");
  auto buffer = buffer_of(tensors[0], "allreduce");
  auto op = reduce_op_of(options.reduceOp, "allreduce");
  order_on_current_stream(*group, "allreduce", tensors);
  return works_.collective(OpType::ALLREDUCE,
                           {group->start({.operation = Operation::AllReduce, .output = buffer, .op = op})}, tensors, {},
                           options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceCoalescedOptions& options) {
  auto group = this->group("allreduce_coalesced");
  TORCH_CHECK(!tensors.empty(), "ProcessGroup libcomm: allreduce_coalesced needs at least one tensor");
  auto op = reduce_op_of(options.reduceOp, "allreduce_coalesced");
  auto buffers = buffers_of(tensors, "allreduce_coalesced", "tensor");
  order_on_current_stream(*group, "allreduce_coalesced", tensors);
  WorkList works;
  for (auto& buffer : buffers)
    works.push_back(group->start({.operation = Operation::AllReduce, .output = buffer, .op = op}));
  return works_.collective(OpType::ALLREDUCE_COALESCED, std::move(works), tensors, {}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::reduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::ReduceOptions& options) {
  auto group = this->group("reduce");
  check_single_tensor(tensors, "reduce");
  auto buffer = buffer_of(tensors[0], "reduce");
  auto op = reduce_op_of(options.reduceOp, "reduce");
  order_on_current_stream(*group, "reduce", tensors);
  return works_.collective(
      OpType::REDUCE,
      {group->start(
          {.operation = Operation::Reduce, .output = buffer, .op = op, .root = static_cast<int>(options.rootRank)})},
      tensors, {}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllgatherOptions& options) {
  auto group = this->group("allgather");
  check_single_tensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "ProcessGroup libcomm: allgather takes a single list of output tensors");
  check_list_size(outputs[0].size(), getSize(), "allgather", "the output list");
  // Tensors of unequal sizes (each rank's size its output's) are libcomm's all_gather_v.
  bool uneven = std::any_of(outputs[0].begin(), outputs[0].end(),
                            [&](const at::Tensor& output) { return output.numel() != inputs[0].numel(); });
  if (uneven) {
    TORCH_CHECK(outputs[0][static_cast<std::size_t>(getRank())].numel() == inputs[0].numel(),
                "ProcessGroup libcomm: allgather: this rank's output tensor (", getRank(), ") holds ",
                outputs[0][static_cast<std::size_t>(getRank())].numel(), " elements and its input ",
                inputs[0].numel(), "; they must be equal");
  } else {
    check_same_type_and_size(inputs[0], outputs[0], "allgather");
  }
  auto input = buffer_of(inputs[0], "allgather", "input tensor");
  auto output_buffers = buffers_of(outputs[0], "allgather", "output tensor");
  order_on_current_stream(*group, "allgather", outputs, inputs);
  return works_.collective(OpType::ALLGATHER,
                           {group->start({.operation = uneven ? Operation::AllGatherV : Operation::AllGather,
                                          .input = input,
                                          .blocks = output_buffers})},
                           outputs[0], inputs, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                               const c10d::AllgatherOptions& options) {
  auto group = this->group("_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: _allgather_base: dtypes differ");
  TORCH_CHECK(output.numel() == input.numel() * getSize(),
              "ProcessGroup libcomm: _allgather_base: the output must hold the group size times the input's elements");
  auto output_buffer = buffer_of(output, "_allgather_base", "output tensor");
  auto input_buffer = buffer_of(input, "_allgather_base", "input tensor");
  order_on_current_stream(*group, "_allgather_base", output, input);
  return works_.collective(
      OpType::_ALLGATHER_BASE,
      {group->start({.operation = Operation::AllGather, .output = output_buffer, .input = input_buffer})}, {output},
      {input}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                   std::vector<at::Tensor>& inputs,
                                                                   const c10d::AllgatherOptions& options) {
  // outputs[r][i]: input i of rank r.
  auto group = this->group("allgather_coalesced");
  check_list_size(outputs.size(), getSize(), "allgather_coalesced", "the output lists");
  order_on_current_stream(*group, "allgather_coalesced", outputs, inputs);
  WorkList works;
  std::vector<at::Tensor> flat_outputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> of_input;
    for (auto& list : outputs) {
      TORCH_CHECK(list.size() == inputs.size(),
                  "ProcessGroup libcomm: allgather_coalesced: every output list must hold one tensor per input");
      of_input.push_back(list[i]);
    }
    check_same_type_and_size(inputs[i], of_input, "allgather_coalesced");
    auto output_buffers = buffers_of(of_input, "allgather_coalesced", "output tensor");
    works.push_back(group->start({.operation = Operation::AllGather,
                                  .input = buffer_of(inputs[i], "allgather_coalesced"),
                                  .blocks = output_buffers}));
    flat_outputs.insert(flat_outputs.end(), of_input.begin(), of_input.end());
  }
  return works_.collective(OpType::ALLGATHER_COALESCED, std::move(works), std::move(flat_outputs), inputs,
                           options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                               std::vector<at::Tensor>& inputs,
                                                                               const c10d::AllgatherOptions& options) {
  const char* operation = "allgather_into_tensor_coalesced";
  auto group = this->group(operation);
  check_list_pairs(outputs, inputs, operation);
  order_on_current_stream(*group, operation, outputs, inputs);
  WorkList works;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "ProcessGroup libcomm: ", operation,
                ": dtypes differ");
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * getSize(), "ProcessGroup libcomm: ", operation,
                ": each output must hold the group size times its input's elements");
    works.push_back(group->start({.operation = Operation::AllGather,
                                  .output = buffer_of(outputs[i], operation, "output tensor"),
                                  .input = buffer_of(inputs[i], operation, "input tensor")}));
  }
  return works_.collective(OpType::COALESCED, std::move(works), outputs, inputs, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::GatherOptions& options) {
  auto group = this->group("gather");
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
  order_on_current_stream(*group, "gather", outputs, inputs);
  return works_.collective(
      OpType::GATHER,
      {group->start({.operation = Operation::Gather, .input = input, .blocks = output_buffers, .root = root})},
      std::move(results), inputs, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::scatter(std::vector<at::Tensor>& outputs,
                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                       const c10d::ScatterOptions& options) {
  auto group = this->group("scatter");
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
  order_on_current_stream(*group, "scatter", outputs, inputs);
  return works_.collective(
      OpType::SCATTER,
      {group->start({.operation = Operation::Scatter, .output = output, .blocks = input_buffers, .root = root})},
      outputs, std::move(keep_alive), options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                              std::vector<std::vector<at::Tensor>>& inputs,
                                                              const c10d::ReduceScatterOptions& options) {
  auto group = this->group("reduce_scatter");
  check_single_tensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "ProcessGroup libcomm: reduce_scatter takes a single list of input tensors");
  check_list_size(inputs[0].size(), getSize(), "reduce_scatter", "the input list");
  // Tensors of unequal sizes (rank r's block the size of input r) are libcomm's reduce_scatter_v.
  std::vector<std::size_t> counts;
  for (const auto& input : inputs[0]) counts.push_back(static_cast<std::size_t>(input.numel()));
  bool uneven = std::any_of(counts.begin(), counts.end(),
                            [&](std::size_t count) { return count != static_cast<std::size_t>(outputs[0].numel()); });
  if (uneven) {
    TORCH_CHECK(counts[static_cast<std::size_t>(getRank())] == static_cast<std::size_t>(outputs[0].numel()),
                "ProcessGroup libcomm: reduce_scatter: this rank's input tensor (", getRank(), ") holds ",
                counts[static_cast<std::size_t>(getRank())], " elements and the output ", outputs[0].numel(),
                "; they must be equal");
  } else {
    check_same_type_and_size(outputs[0], inputs[0], "reduce_scatter");
  }
  auto op = reduce_op_of(options.reduceOp, "reduce_scatter");
  order_on_current_stream(*group, "reduce_scatter", outputs, inputs);
  // libcomm reduces one flat input of size() blocks: the list is copied into one.
  std::vector<at::Tensor> flat_parts;
  for (const auto& input : inputs[0]) flat_parts.push_back(input.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  auto output = buffer_of(outputs[0], "reduce_scatter", "output tensor");
  auto input = buffer_of(flat, "reduce_scatter", "input tensor");
  comm::Call call{.operation = Operation::ReduceScatter, .output = output, .input = input, .op = op};
  if (uneven) {
    call.operation = Operation::ReduceScatterV;
    call.input_counts = counts;
  }
  return works_.collective(OpType::REDUCE_SCATTER, {group->start(call)}, outputs, {flat}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::ReduceScatterOptions& options) {
  auto group = this->group("_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroup libcomm: _reduce_scatter_base: dtypes differ");
  TORCH_CHECK(input.numel() == output.numel() * getSize(),
              "ProcessGroup libcomm: _reduce_scatter_base: the input must hold the group size times the output's "
              "elements");
  auto op = reduce_op_of(options.reduceOp, "_reduce_scatter_base");
  auto output_buffer = buffer_of(output, "_reduce_scatter_base", "output tensor");
  auto input_buffer = buffer_of(input, "_reduce_scatter_base", "input tensor");
  order_on_current_stream(*group, "_reduce_scatter_base", output, input);
  return works_.collective(
      OpType::_REDUCE_SCATTER_BASE,
      {group->start({.operation = Operation::ReduceScatter, .output = output_buffer, .input = input_buffer, .op = op})},
      {output}, {input}, options.timeout);
}

c10::intrusive_ptr<c10d::Work> LibcommBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& options) {
  const char* operation = "reduce_scatter_tensor_coalesced";
  auto group = this->group(operation);
  check_list_pairs(outputs, inputs, operation);
  auto op = reduce_op_of(options.reduceOp, operation);
  order_on_current_stream(*group, operation, outputs, inputs);
  WorkList works;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "ProcessGroup libcomm: ", operation,
                ": dtypes differ");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * getSize(), "ProcessGroup libcomm: ", operation,
                ": each input must hold the group size times its output's elements");
    works.push_back(group->start({.operation = Operation::ReduceScatter,
                                  .output = buffer_of(outputs[i], operation, "output tensor"),
                                  .input = buffer_of(inputs[i], operation, "input tensor"),
                                  .op = op}));
  }
  return works_.collective(OpType::COALESCED, std::move(works), outputs, inputs, options.timeout);
}

}  // namespace torch_libcomm
