// The public ProcessGroup: each call, blocking or its i-form, handed to the implementation
// (group.hpp). Nothing else happens here, so users never see the library's internals.
#include "comm/process_group.hpp"
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

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks,
                                                      std::optional<std::chrono::milliseconds> timeout) {
  return std::make_shared<ProcessGroup>(impl_->new_group(std::move(ranks), std::nullopt, timeout));
}
std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks, std::string_view key,
                                                      std::optional<std::chrono::milliseconds> timeout) {
  return std::make_shared<ProcessGroup>(impl_->new_group(std::move(ranks), std::string(key), timeout));
}

void ProcessGroup::send(Buffer buffer, int dst, int tag) { impl_->send(buffer, dst, tag); }
int ProcessGroup::recv(Buffer buffer, int src, int tag) { return impl_->recv(buffer, src, tag); }
std::shared_ptr<Work> ProcessGroup::isend(Buffer buffer, int dst, int tag) { return impl_->isend(buffer, dst, tag); }
std::shared_ptr<Work> ProcessGroup::irecv(Buffer buffer, int src, int tag) { return impl_->irecv(buffer, src, tag); }

void ProcessGroup::broadcast(Buffer buffer, int root, std::string_view algorithm) {
  impl_->broadcast(buffer, root, parse_algorithm(algorithm, "the algorithm"), false);
}
std::shared_ptr<Work> ProcessGroup::ibroadcast(Buffer buffer, int root, std::string_view algorithm) {
  return impl_->broadcast(buffer, root, parse_algorithm(algorithm, "the algorithm"), true);
}
void ProcessGroup::all_reduce(Buffer buffer, ReduceOp op, std::string_view algorithm) {
  impl_->all_reduce(buffer, op, parse_algorithm(algorithm, "the algorithm"), false);
}
std::shared_ptr<Work> ProcessGroup::iall_reduce(Buffer buffer, ReduceOp op, std::string_view algorithm) {
  return impl_->all_reduce(buffer, op, parse_algorithm(algorithm, "the algorithm"), true);
}
void ProcessGroup::reduce(Buffer buffer, int root, ReduceOp op, std::string_view algorithm) {
  impl_->reduce(buffer, root, op, parse_algorithm(algorithm, "the algorithm"), false);
}
std::shared_ptr<Work> ProcessGroup::ireduce(Buffer buffer, int root, ReduceOp op, std::string_view algorithm) {
  return impl_->reduce(buffer, root, op, parse_algorithm(algorithm, "the algorithm"), true);
}
void ProcessGroup::all_gather(std::span<Buffer> outputs, Buffer input) { impl_->all_gather(outputs, input, false); }
std::shared_ptr<Work> ProcessGroup::iall_gather(std::span<Buffer> outputs, Buffer input) {
  return impl_->all_gather(outputs, input, true);
}
void ProcessGroup::all_gather(Buffer output, Buffer input, std::string_view algorithm) {
  impl_->all_gather(output, input, parse_algorithm(algorithm, "the algorithm"), false);
}
std::shared_ptr<Work> ProcessGroup::iall_gather(Buffer output, Buffer input, std::string_view algorithm) {
  return impl_->all_gather(output, input, parse_algorithm(algorithm, "the algorithm"), true);
}
void ProcessGroup::gather(Buffer input, std::span<Buffer> outputs, int root) {
  impl_->gather(input, outputs, root, false);
}
std::shared_ptr<Work> ProcessGroup::igather(Buffer input, std::span<Buffer> outputs, int root) {
  return impl_->gather(input, outputs, root, true);
}
void ProcessGroup::scatter(Buffer output, std::span<const Buffer> inputs, int root) {
  impl_->scatter(output, inputs, root, false);
}
std::shared_ptr<Work> ProcessGroup::iscatter(Buffer output, std::span<const Buffer> inputs, int root) {
  return impl_->scatter(output, inputs, root, true);
}
void ProcessGroup::reduce_scatter(Buffer output, Buffer input, ReduceOp op, std::string_view algorithm) {
  impl_->reduce_scatter(output, input, op, parse_algorithm(algorithm, "the algorithm"), false);
}
std::shared_ptr<Work> ProcessGroup::ireduce_scatter(Buffer output, Buffer input, ReduceOp op,
                                                    std::string_view algorithm) {
  return impl_->reduce_scatter(output, input, op, parse_algorithm(algorithm, "the algorithm"), true);
}
void ProcessGroup::all_to_all(Buffer output, Buffer input) { impl_->all_to_all(output, input, false); }
std::shared_ptr<Work> ProcessGroup::iall_to_all(Buffer output, Buffer input) {
  return impl_->all_to_all(output, input, true);
}
void ProcessGroup::barrier() { impl_->barrier(false); }
std::shared_ptr<Work> ProcessGroup::ibarrier() { return impl_->barrier(true); }

}  // namespace comm
