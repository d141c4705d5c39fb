// Each collective of a group: its argument checks on the calling rank, then the form for where
// the buffers live (host_collectives.cpp, device_collectives.cpp).
#include <vector>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/reduce.hpp"
#include "libcomm/src/group.hpp"

namespace comm {
namespace {

bool on_gpu(const Buffer& buffer) { return buffer.device.kind == Device::Kind::Cuda; }

}  // namespace

std::shared_ptr<Work> ProcessGroup::Impl::broadcast(Buffer buffer, int root, Algorithm requested, bool async) {
  const char* op = "broadcast";
  check_buffer(buffer, op);
  check_root(root, op);
  if (on_gpu(buffer)) return device_broadcast(buffer, root, async);
  return host_collective({.collective = Collective::Broadcast,
                          .dtype = buffer.dtype,
                          .root = root,
                          .count = buffer.count,
                          .output = buffer.data},
                         requested, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::all_reduce(Buffer buffer, ReduceOp op_, Algorithm requested, bool async) {
  check_buffer(buffer, "all_reduce");
  algorithms::check_supported(buffer.dtype, op_, rank());
  if (on_gpu(buffer)) return device_all_reduce(buffer, op_, async);
  return host_collective({.collective = Collective::AllReduce,
                          .dtype = buffer.dtype,
                          .op = op_,
                          .count = buffer.count,
                          .output = buffer.data},
                         requested, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::reduce(Buffer buffer, int root, ReduceOp op_, Algorithm requested,
                                                 bool async) {
  const char* op = "reduce";
  check_buffer(buffer, op);
  check_root(root, op);
  algorithms::check_supported(buffer.dtype, op_, rank());
  if (on_gpu(buffer)) return device_reduce(buffer, root, op_, async);
  return host_collective({.collective = Collective::Reduce,
                          .dtype = buffer.dtype,
                          .op = op_,
                          .root = root,
                          .count = buffer.count,
                          .output = buffer.data},
                         requested, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::all_gather(Buffer output, Buffer input, Algorithm requested, bool async) {
  const char* op = "all_gather";
  check_pair_buffers(output, input, op);
  auto n = static_cast<std::size_t>(size());
  // Compared by division: size() x input count may not fit in a size_t.
  check_count(input.count <= output.count / n, op,
              "the output holds " + std::to_string(output.count) + " elements; it needs size() x input count = " +
                  std::to_string(n) + " x " + std::to_string(input.count));
  if (on_gpu(output)) return device_all_gather(output, input, async);
  return host_collective({.collective = Collective::AllGather,
                          .dtype = input.dtype,
                          .count = input.count,
                          .output = output.data,
                          .input = input.data},
                         requested, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::all_gather(std::span<Buffer> outputs, Buffer input, bool async) {
  const char* op = "all_gather";
  check_buffer(input, op);
  check_blocks(outputs, input, true, op);
  if (on_gpu(input)) {
    std::vector<void*> blocks;
    for (const Buffer& output : outputs) blocks.push_back(output.data);
    return device_all_gather(std::move(blocks), input, async);
  }
  std::vector<void*> blocks;
  for (const Buffer& output : outputs) blocks.push_back(output.data);
  // One output per rank goes through a flat copy, which the ring does (algorithm_table.cpp).
  return host_collective({.collective = Collective::AllGather,
                          .dtype = input.dtype,
                          .count = input.count,
                          .input = input.data,
                          .output_blocks = std::move(blocks)},
                         Algorithm::Ring, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::gather(Buffer input, std::span<Buffer> outputs, int root, bool async) {
  const char* op = "gather";
  check_buffer(input, op);
  check_root(root, op);
  std::vector<void*> blocks;
  if (rank() == root) {
    check_blocks(outputs, input, true, op);
    for (const Buffer& output : outputs) blocks.push_back(output.data);
  }
  if (on_gpu(input)) return device_gather(input, std::move(blocks), root, async);
  return host_collective({.collective = Collective::Gather,
                          .dtype = input.dtype,
                          .root = root,
                          .count = input.count,
                          .input = input.data,
                          .output_blocks = std::move(blocks)},
                         Algorithm::Auto, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::scatter(Buffer output, std::span<const Buffer> inputs, int root, bool async) {
  const char* op = "scatter";
  check_buffer(output, op);
  check_root(root, op);
  std::vector<const void*> blocks;
  if (rank() == root) {
    check_blocks(inputs, output, false, op);
    for (const Buffer& input : inputs) blocks.push_back(input.data);
  }
  if (on_gpu(output)) return device_scatter(output, std::move(blocks), root, async);
  return host_collective({.collective = Collective::Scatter,
                          .dtype = output.dtype,
                          .root = root,
                          .count = output.count,
                          .output = output.data,
                          .input_blocks = std::move(blocks)},
                         Algorithm::Auto, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::reduce_scatter(Buffer output, Buffer input, ReduceOp op_, Algorithm requested,
                                                         bool async) {
  const char* op = "reduce_scatter";
  check_pair_buffers(output, input, op);
  algorithms::check_supported(input.dtype, op_, rank());
  auto n = static_cast<std::size_t>(size());
  check_count(output.count <= input.count / n, op,
              "the input holds " + std::to_string(input.count) + " elements; it needs size() x output count = " +
                  std::to_string(n) + " x " + std::to_string(output.count));
  if (on_gpu(output)) return device_reduce_scatter(output, input, op_, async);
  return host_collective({.collective = Collective::ReduceScatter,
                          .dtype = input.dtype,
                          .op = op_,
                          .count = output.count,
                          .output = output.data,
                          .input = input.data},
                         requested, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::all_to_all(Buffer output, Buffer input, bool async) {
  const char* op = "all_to_all";
  check_pair_buffers(output, input, op);
  auto n = static_cast<std::size_t>(size());
  check_count(input.count % n == 0, op,
              "the input holds " + std::to_string(input.count) + " elements, not a multiple of the group size " +
                  std::to_string(n));
  check_count(output.count >= input.count, op,
              "the output holds " + std::to_string(output.count) + " elements, fewer than the input's " +
                  std::to_string(input.count));
  if (on_gpu(output)) return device_all_to_all(output, input, async);
  return host_collective({.collective = Collective::AllToAll,
                          .dtype = input.dtype,
                          .count = input.count / n,
                          .output = output.data,
                          .input = input.data},
                         Algorithm::Auto, async);
}

std::shared_ptr<Work> ProcessGroup::Impl::barrier(bool async) {
  check_member("barrier");
  return host_collective({.collective = Collective::Barrier}, Algorithm::Auto, async);
}

}  // namespace comm
