// The public ProcessGroup: each call, blocking or its i-form, made one Call value and handed to
// the implementation (group.hpp). Nothing else happens here, so users never see the library's
// internals.
#include "comm/process_group.hpp"

#include <algorithm>

#include "libcomm/base/algorithm.hpp"

#include "libcomm/src/group.hpp"

namespace comm {

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return impl_->rank(); }
int ProcessGroup::size() const { return impl_->size(); }
int ProcessGroup::local_rank() const { return impl_->identity().local_rank; }
int ProcessGroup::local_size() const { return impl_->identity().local_size; }
const std::string& ProcessGroup::name() const { return impl_->identity().name; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout(); }
Store& ProcessGroup::store() const { return impl_->store(); }
const char* ProcessGroup::transport_name() const { return impl_->transport_name(); }
bool ProcessGroup::shared_memory_usable() const { return impl_->shared_memory_usable(); }
const char* ProcessGroup::algorithm_for(Collective collective, std::size_t bytes, std::string_view requested) const {
  return to_string(impl_->algorithm_for(collective, bytes, parse_algorithm(requested, "the requested algorithm")));
}
void ProcessGroup::set_cuda_stream(void* stream) { impl_->set_cuda_stream(stream); }
void* ProcessGroup::cuda_stream() const { return impl_->cuda_stream(); }
void ProcessGroup::abort() { impl_->abort(); }
void ProcessGroup::revoke(std::string reason) { impl_->revoke(reason); }
std::shared_ptr<ProcessGroup> ProcessGroup::grow(int count) {
  return impl_->traced(trace::Event::Grow, static_cast<std::size_t>(std::max(count, 0)), [&] { return impl_->grow(count); });
}
std::shared_ptr<ProcessGroup> ProcessGroup::shrink(std::vector<int> exclude) {
  return std::make_shared<ProcessGroup>(
      impl_->traced(trace::Event::Shrink, exclude.size(), [&] { return impl_->shrink(exclude); }));
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks,
                                                      std::optional<std::chrono::milliseconds> timeout) {
  std::size_t count = ranks.size();
  return std::make_shared<ProcessGroup>(impl_->traced(
      trace::Event::NewGroup, count, [&] { return impl_->new_group(std::move(ranks), std::nullopt, timeout); }));
}
std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks, std::string_view key,
                                                      std::optional<std::chrono::milliseconds> timeout) {
  std::size_t count = ranks.size();
  return std::make_shared<ProcessGroup>(impl_->traced(
      trace::Event::NewGroup, count, [&] { return impl_->new_group(std::move(ranks), std::string(key), timeout); }));
}

std::shared_ptr<Work> ProcessGroup::start(const Call& call) { return impl_->start(call); }
int ProcessGroup::run(const Call& call) { return impl_->run(call); }

// Every form below is one Call, started (the i-forms) or run.
namespace {

Call transfer(Operation operation, Buffer buffer, int peer, int tag) {
  Call call{.operation = operation, .root = peer, .tag = tag};
  (operation == Operation::Send ? call.input : call.output) = buffer;
  return call;
}
Call in_place(Operation operation, Buffer buffer, int root, ReduceOp op, std::string_view algorithm) {
  return {.operation = operation, .output = buffer, .op = op, .root = root, .algorithm = algorithm};
}
Call paired(Operation operation, Buffer output, Buffer input, ReduceOp op = ReduceOp::Sum,
            std::string_view algorithm = {}) {
  return {.operation = operation, .output = output, .input = input, .op = op, .algorithm = algorithm};
}
Call uneven(Buffer output, std::span<const std::size_t> output_counts, Buffer input,
            std::span<const std::size_t> input_counts) {
  return {.operation = Operation::AllToAllV,
          .output = output,
          .input = input,
          .input_counts = input_counts,
          .output_counts = output_counts};
}
Call listed(Operation operation, Buffer own, std::span<const Buffer> blocks, int root) {
  Call call{.operation = operation, .blocks = blocks, .root = root};
  (operation == Operation::Scatter ? call.output : call.input) = own;
  return call;
}

}  // namespace

// The blocking send and recv skip the Call: a small message's whole cost is its path.
void ProcessGroup::send(Buffer buffer, int dst, int tag) { impl_->send(buffer, dst, tag); }
int ProcessGroup::recv(Buffer buffer, int src, int tag) { return impl_->recv(buffer, src, tag); }
std::shared_ptr<Work> ProcessGroup::isend(Buffer buffer, int dst, int tag) {
  return start(transfer(Operation::Send, buffer, dst, tag));
}
std::shared_ptr<Work> ProcessGroup::irecv(Buffer buffer, int src, int tag) {
  return start(transfer(Operation::Recv, buffer, src, tag));
}

void ProcessGroup::broadcast(Buffer buffer, int root, std::string_view algorithm) {
  run(in_place(Operation::Broadcast, buffer, root, ReduceOp::Sum, algorithm));
}
std::shared_ptr<Work> ProcessGroup::ibroadcast(Buffer buffer, int root, std::string_view algorithm) {
  return start(in_place(Operation::Broadcast, buffer, root, ReduceOp::Sum, algorithm));
}
void ProcessGroup::all_reduce(Buffer buffer, ReduceOp op, std::string_view algorithm) {
  run(in_place(Operation::AllReduce, buffer, 0, op, algorithm));
}
std::shared_ptr<Work> ProcessGroup::iall_reduce(Buffer buffer, ReduceOp op, std::string_view algorithm) {
  return start(in_place(Operation::AllReduce, buffer, 0, op, algorithm));
}
void ProcessGroup::reduce(Buffer buffer, int root, ReduceOp op, std::string_view algorithm) {
  run(in_place(Operation::Reduce, buffer, root, op, algorithm));
}
std::shared_ptr<Work> ProcessGroup::ireduce(Buffer buffer, int root, ReduceOp op, std::string_view algorithm) {
  return start(in_place(Operation::Reduce, buffer, root, op, algorithm));
}
void ProcessGroup::all_gather(std::span<Buffer> outputs, Buffer input) {
  run(listed(Operation::AllGather, input, outputs, 0));
}
std::shared_ptr<Work> ProcessGroup::iall_gather(std::span<Buffer> outputs, Buffer input) {
  return start(listed(Operation::AllGather, input, outputs, 0));
}
void ProcessGroup::all_gather(Buffer output, Buffer input, std::string_view algorithm) {
  run(paired(Operation::AllGather, output, input, ReduceOp::Sum, algorithm));
}
std::shared_ptr<Work> ProcessGroup::iall_gather(Buffer output, Buffer input, std::string_view algorithm) {
  return start(paired(Operation::AllGather, output, input, ReduceOp::Sum, algorithm));
}
void ProcessGroup::gather(Buffer input, std::span<Buffer> outputs, int root) {
  run(listed(Operation::Gather, input, outputs, root));
}
std::shared_ptr<Work> ProcessGroup::igather(Buffer input, std::span<Buffer> outputs, int root) {
  return start(listed(Operation::Gather, input, outputs, root));
}
void ProcessGroup::scatter(Buffer output, std::span<const Buffer> inputs, int root) {
  run(listed(Operation::Scatter, output, inputs, root));
}
std::shared_ptr<Work> ProcessGroup::iscatter(Buffer output, std::span<const Buffer> inputs, int root) {
  return start(listed(Operation::Scatter, output, inputs, root));
}
void ProcessGroup::reduce_scatter(Buffer output, Buffer input, ReduceOp op, std::string_view algorithm) {
  run(paired(Operation::ReduceScatter, output, input, op, algorithm));
}
std::shared_ptr<Work> ProcessGroup::ireduce_scatter(Buffer output, Buffer input, ReduceOp op,
                                                    std::string_view algorithm) {
  return start(paired(Operation::ReduceScatter, output, input, op, algorithm));
}
void ProcessGroup::all_to_all(Buffer output, Buffer input) { run(paired(Operation::AllToAll, output, input)); }
std::shared_ptr<Work> ProcessGroup::iall_to_all(Buffer output, Buffer input) {
  return start(paired(Operation::AllToAll, output, input));
}
void ProcessGroup::all_to_all_v(Buffer output, std::span<const std::size_t> output_counts, Buffer input,
                                std::span<const std::size_t> input_counts) {
  run(uneven(output, output_counts, input, input_counts));
}
std::shared_ptr<Work> ProcessGroup::iall_to_all_v(Buffer output, std::span<const std::size_t> output_counts,
                                                  Buffer input, std::span<const std::size_t> input_counts) {
  return start(uneven(output, output_counts, input, input_counts));
}
void ProcessGroup::all_gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts) {
  run({.operation = Operation::AllGatherV, .output = output, .input = input, .output_counts = counts});
}
std::shared_ptr<Work> ProcessGroup::iall_gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts) {
  return start({.operation = Operation::AllGatherV, .output = output, .input = input, .output_counts = counts});
}
void ProcessGroup::reduce_scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts, ReduceOp op) {
  run({.operation = Operation::ReduceScatterV, .output = output, .input = input, .input_counts = counts, .op = op});
}
std::shared_ptr<Work> ProcessGroup::ireduce_scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts,
                                                      ReduceOp op) {
  return start(
      {.operation = Operation::ReduceScatterV, .output = output, .input = input, .input_counts = counts, .op = op});
}
void ProcessGroup::gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root) {
  run({.operation = Operation::GatherV, .output = output, .input = input, .output_counts = counts, .root = root});
}
std::shared_ptr<Work> ProcessGroup::igather_v(Buffer output, Buffer input, std::span<const std::size_t> counts,
                                              int root) {
  return start({.operation = Operation::GatherV, .output = output, .input = input, .output_counts = counts, .root = root});
}
void ProcessGroup::scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root) {
  run({.operation = Operation::ScatterV, .output = output, .input = input, .input_counts = counts, .root = root});
}
std::shared_ptr<Work> ProcessGroup::iscatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts,
                                               int root) {
  return start({.operation = Operation::ScatterV, .output = output, .input = input, .input_counts = counts, .root = root});
}
void ProcessGroup::barrier() { run({.operation = Operation::Barrier}); }
std::shared_ptr<Work> ProcessGroup::ibarrier() { return start({.operation = Operation::Barrier}); }

}  // namespace comm
