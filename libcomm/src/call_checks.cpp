#include "libcomm/src/call_checks.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/reduce.hpp"
#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/collective_traits.hpp"

namespace comm {

void CallChecks::check_member(const char* op) const {
  COMM_CHECK(rank_ >= 0, InvalidArgumentError, ErrorContext{.op = op},
             "this process is not a member of group '" + group_name_ +
                 "' (it was left out of the ranks passed to new_group); only members may use the group");
}

void CallChecks::check_buffer(const Buffer& buffer, const char* op) const {
  check_member(op);
  COMM_CHECK(buffer.data != nullptr || buffer.count == 0, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "the buffer is a null pointer with a count of " + std::to_string(buffer.count));
  std::size_t element = element_size(buffer.dtype);
  COMM_CHECK(element != 0, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "the buffer's dtype (" + std::to_string(static_cast<int>(buffer.dtype)) +
                 ") is none of comm::DType's values; pass one of them (int8 .. bool)");
  // Sizes computed from the count must not wrap around (nor run past the end of the address
  // space): a wrapped size would pass every later check and move the wrong number of bytes.
  auto room = std::numeric_limits<std::uintptr_t>::max() - reinterpret_cast<std::uintptr_t>(buffer.data);
  COMM_CHECK(buffer.count <= room / element, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "the buffer's count " + std::to_string(buffer.count) + " of " + to_string(buffer.dtype) +
                 " is more bytes than memory can hold");
  if (buffer.device.kind == Device::Kind::Cuda) {
    ErrorContext context{.rank = rank_, .op = op};
    COMM_CHECK(cuda::built_with_cuda(), InvalidArgumentError, context,
               "the buffer is on " + to_string(buffer.device) +
                   " but this libcomm was built without CUDA; rebuild "
                   "with nvcc on PATH, or pass host memory");
    int actual = cuda::device_of(buffer.data);
    COMM_CHECK(
        buffer.count == 0 || actual == buffer.device.index, InvalidArgumentError, context,
        "the buffer is tagged " + to_string(buffer.device) + " but its memory is " +
            (actual < 0 ? std::string("host memory (or unknown to CUDA)") : "on cuda:" + std::to_string(actual)) +
            "; tag a buffer with the device its memory is on");
  } else if (buffer.count > 0 && cuda::devices_present()) {
    // Reading device memory from the host would crash: say what is wrong instead.
    int actual = cuda::device_of(buffer.data);
    COMM_CHECK(actual < 0, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
               "the buffer is tagged cpu but its memory is on cuda:" + std::to_string(actual) +
                   "; pass Device{Device::Kind::Cuda, " + std::to_string(actual) + "} or copy it to host memory");
  }
}

void CallChecks::check_peer(int peer, const char* op, bool any_source_allowed) const {
  COMM_CHECK((peer >= 0 && peer < size_) || (any_source_allowed && peer == kAnySource), InvalidArgumentError,
             (ErrorContext{.rank = rank_, .op = op}),
             "rank " + std::to_string(peer) + " is not in this group of " + std::to_string(size_) +
                 " ranks (valid: 0.." + std::to_string(size_ - 1) + (any_source_allowed ? ", or kAnySource)" : ")"));
}

void CallChecks::check_tag(int tag, const char* op) const {
  COMM_CHECK(tag >= 0, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "tag " + std::to_string(tag) + " is negative; tags are >= 0");
}

bool CallChecks::ask_gpus_present() { return cuda::devices_present(); }

void CallChecks::check_send(const Buffer& buffer, int dst, int tag) const {
  check_buffer(buffer, "send");
  check_peer(dst, "send", false);
  check_tag(tag, "send");
}

void CallChecks::check_recv(const Buffer& buffer, int src, int tag) const {
  check_buffer(buffer, "recv");
  check_peer(src, "recv", true);
  check_tag(tag, "recv");
  // The transport reports any-source senders by transport rank, which only the world group
  // shares with its ranks.
  COMM_CHECK(src != kAnySource || world_group_, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = "recv"}),
             "receiving from kAnySource works on the world group only; name the source rank");
}

void CallChecks::gpu_transfer(int peer, int tag, bool receiving, bool staged) const {
  const char* op = receiving ? "recv" : "send";
  check_peer(peer, op, receiving);
  check_tag(tag, op);
  COMM_CHECK(peer != kAnySource || staged, InvalidArgumentError, (ErrorContext{.rank = rank_, .peer = peer, .op = op}),
             "receiving a GPU buffer from kAnySource needs the staged path (COMM_CUDA_PATH=staging); through CUDA "
             "IPC, name the source rank");
  if (receiving) check_recv(Buffer(nullptr, 0, DType::UInt8), peer, tag);  // the any-source rules of host receives
}

void CallChecks::check_root(int root, const char* op) const {
  COMM_CHECK(root >= 0 && root < size_, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size_) +
                 " ranks (valid: 0.." + std::to_string(size_ - 1) + ")");
}

void CallChecks::check_pair(const Buffer& output, const Buffer& input, const char* op) const {
  COMM_CHECK(output.dtype == input.dtype, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             std::string("the input is ") + to_string(input.dtype) + " and the output " + to_string(output.dtype) +
                 "; both must have the same dtype");
  COMM_CHECK(output.device.kind == input.device.kind && output.device.index == input.device.index, InvalidArgumentError,
             (ErrorContext{.rank = rank_, .op = op}),
             "the input is on " + to_string(input.device) + " and the output on " + to_string(output.device) +
                 "; one call takes buffers of one device (mixing host and GPU memory is not allowed)");
}

void CallChecks::check_pair_buffers(const Buffer& output, const Buffer& input, const char* op) const {
  check_member(op);
  check_pair(output, input, op);
  check_buffer(output, op);
  check_buffer(input, op);
}

void CallChecks::check_count(bool ok, const char* op, const std::string& message) const {
  COMM_CHECK(ok, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}), message);
}

void CallChecks::check_blocks(std::span<const Buffer> blocks, const Buffer& own, bool outputs, const char* op) const {
  std::string who = std::string(op) == "all_gather" ? "got " : "the root got ";
  check_count(blocks.size() == static_cast<std::size_t>(size_), op,
              who + std::to_string(blocks.size()) + (outputs ? " output" : " input") + " buffers; pass one per rank (" +
                  std::to_string(size_) + ")");
  for (const Buffer& block : blocks) {
    if (outputs) {
      check_pair(block, own, op);
      check_buffer(block, op);
      check_count(block.count >= own.count, op,
                  "an output buffer holds " + std::to_string(block.count) + " elements, fewer than the input's " +
                      std::to_string(own.count));
    } else {
      check_pair(own, block, op);
      check_buffer(block, op);
      check_count(block.count == own.count, op,
                  "an input buffer holds " + std::to_string(block.count) + " elements and the output " +
                      std::to_string(own.count) + "; they must be equal");
    }
  }
}

namespace {

// The blocks' pointers, as HostCall holds them (void* for outputs, const void* for inputs).
template <class Pointer>
std::vector<Pointer> pointers_of(std::span<const Buffer> blocks) {
  std::vector<Pointer> pointers;
  for (const Buffer& block : blocks) pointers.push_back(block.data);
  return pointers;
}

}  // namespace

namespace {

// all_to_all_v's counts as HostCall keeps them: input's, then output's.
std::vector<std::size_t> counts_of(const Call& call) {
  std::vector<std::size_t> counts(call.input_counts.begin(), call.input_counts.end());
  counts.insert(counts.end(), call.output_counts.begin(), call.output_counts.end());
  return counts;
}

}  // namespace

// The sum of one count per rank, which `buffer_count` elements must hold (summed without
// wrapping around: a wrapped total would pass and move the wrong blocks).
std::size_t CallChecks::total_of(std::span<const std::size_t> counts, const char* name, std::size_t buffer_count,
                                 const char* op) const {
  check_count(counts.size() == static_cast<std::size_t>(size_), op,
              std::string(name) + " has " + std::to_string(counts.size()) + " counts; it needs one per rank, " +
                  std::to_string(size_));
  std::size_t total = 0;
  for (std::size_t count : counts) {
    if (count > buffer_count - total) {
      check_count(false, op,
                  std::string(name) + " add up to more elements than its buffer holds (" +
                      std::to_string(buffer_count) + ")");
    }
    total += count;
  }
  return total;
}

// This rank's count, which `buffer` (this rank's side of the call) must hold; after total_of.
std::size_t CallChecks::own_count(std::span<const std::size_t> counts, const Buffer& buffer, const char* name,
                                  const char* op) const {
  std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  check_count(buffer.count >= mine, op,
              std::string("the ") + name + " holds " + std::to_string(buffer.count) +
                  " elements, fewer than this rank's count " + std::to_string(mine));
  return mine;
}

algorithms::HostCall CallChecks::collective(const Call& call) const {
  const char* op = to_string(call.operation);
  auto n = static_cast<std::size_t>(size_);
  const Buffer& output = call.output;
  const Buffer& input = call.input;
  switch (call.operation) {
    case Operation::Broadcast:
      check_buffer(output, op);
      check_root(call.root, op);
      return {.collective = Collective::Broadcast,
              .dtype = output.dtype,
              .root = call.root,
              .count = output.count,
              .output = output.data};
    case Operation::AllReduce:
    case Operation::Reduce: {
      bool rooted = call.operation == Operation::Reduce;
      check_buffer(output, op);
      if (rooted) check_root(call.root, op);
      algorithms::check_supported(output.dtype, call.op, rank_);
      return {.collective = rooted ? Collective::Reduce : Collective::AllReduce,
              .dtype = output.dtype,
              .op = call.op,
              .root = rooted ? call.root : -1,
              .count = output.count,
              .output = output.data};
    }
    case Operation::AllGather:
      if (!call.blocks.empty()) {
        check_buffer(input, op);
        check_blocks(call.blocks, input, true, op);
        // One output per rank goes through a flat copy, which the ring does (algorithm_table.cpp).
        return {.collective = Collective::AllGather,
                .dtype = input.dtype,
                .count = input.count,
                .input = input.data,
                .output_blocks = pointers_of<void*>(call.blocks)};
      }
      check_pair_buffers(output, input, op);
      // Compared by division: size() x input count may not fit in a size_t.
      check_count(input.count <= output.count / n, op,
                  "the output holds " + std::to_string(output.count) + " elements; it needs size() x input count = " +
                      std::to_string(n) + " x " + std::to_string(input.count));
      return {.collective = Collective::AllGather,
              .dtype = input.dtype,
              .count = input.count,
              .output = output.data,
              .input = input.data};
    case Operation::Gather: {
      check_buffer(input, op);
      check_root(call.root, op);
      if (rank_ == call.root) check_blocks(call.blocks, input, true, op);
      return {.collective = Collective::Gather,
              .dtype = input.dtype,
              .root = call.root,
              .count = input.count,
              .input = input.data,
              .output_blocks = rank_ == call.root ? pointers_of<void*>(call.blocks) : std::vector<void*>{}};
    }
    case Operation::Scatter: {
      check_buffer(output, op);
      check_root(call.root, op);
      if (rank_ == call.root) check_blocks(call.blocks, output, false, op);
      return {.collective = Collective::Scatter,
              .dtype = output.dtype,
              .root = call.root,
              .count = output.count,
              .output = output.data,
              .input_blocks = rank_ == call.root ? pointers_of<const void*>(call.blocks) : std::vector<const void*>{}};
    }
    case Operation::ReduceScatter:
      check_pair_buffers(output, input, op);
      algorithms::check_supported(input.dtype, call.op, rank_);
      check_count(output.count <= input.count / n, op,
                  "the input holds " + std::to_string(input.count) + " elements; it needs size() x output count = " +
                      std::to_string(n) + " x " + std::to_string(output.count));
      return {.collective = Collective::ReduceScatter,
              .dtype = input.dtype,
              .op = call.op,
              .count = output.count,
              .output = output.data,
              .input = input.data};
    case Operation::AllToAll:
      check_pair_buffers(output, input, op);
      check_count(input.count % n == 0, op,
                  "the input holds " + std::to_string(input.count) + " elements, not a multiple of the group size " +
                      std::to_string(n));
      check_count(output.count >= input.count, op,
                  "the output holds " + std::to_string(output.count) + " elements, fewer than the input's " +
                      std::to_string(input.count));
      return {.collective = Collective::AllToAll,
              .dtype = input.dtype,
              .count = input.count / n,
              .output = output.data,
              .input = input.data};
    case Operation::AllToAllV: {
      check_pair_buffers(output, input, op);
      std::size_t sent = total_of(call.input_counts, "input_counts", input.count, op);
      total_of(call.output_counts, "output_counts", output.count, op);
      return {.collective = Collective::AllToAllV,
              .dtype = input.dtype,
              .count = sent,
              .output = output.data,
              .input = input.data,
              .counts = counts_of(call)};
    }
    case Operation::AllGatherV: {
      if (!call.blocks.empty()) {
        // One output per rank, each rank's count that output's (torch's all_gather of unequal tensors).
        check_buffer(input, op);
        check_count(call.blocks.size() == n, op,
                    "got " + std::to_string(call.blocks.size()) + " output buffers; pass one per rank (" +
                        std::to_string(n) + ")");
        std::vector<std::size_t> counts;
        for (const Buffer& block : call.blocks) {
          check_pair(block, input, op);
          check_buffer(block, op);
          counts.push_back(block.count);
        }
        std::size_t mine = own_count(counts, input, "input", op);
        return {.collective = Collective::AllGatherV,
                .dtype = input.dtype,
                .count = mine,
                .input = input.data,
                .output_blocks = pointers_of<void*>(call.blocks),
                .counts = std::move(counts)};
      }
      check_pair_buffers(output, input, op);
      total_of(call.output_counts, "counts", output.count, op);
      std::size_t mine = own_count(call.output_counts, input, "input", op);
      return {.collective = Collective::AllGatherV,
              .dtype = input.dtype,
              .count = mine,
              .output = output.data,
              .input = input.data,
              .counts = {call.output_counts.begin(), call.output_counts.end()}};
    }
    case Operation::ReduceScatterV: {
      check_pair_buffers(output, input, op);
      algorithms::check_supported(input.dtype, call.op, rank_);
      total_of(call.input_counts, "counts", input.count, op);
      std::size_t mine = own_count(call.input_counts, output, "output", op);
      return {.collective = Collective::ReduceScatterV,
              .dtype = input.dtype,
              .op = call.op,
              .count = mine,
              .output = output.data,
              .input = input.data,
              .counts = {call.input_counts.begin(), call.input_counts.end()}};
    }
    case Operation::GatherV:
    case Operation::ScatterV: {
      bool gathering = call.operation == Operation::GatherV;
      const Buffer& own = gathering ? input : output;    // this rank's block
      const Buffer& whole = gathering ? output : input;  // every rank's, on the root
      std::span<const std::size_t> counts = gathering ? call.output_counts : call.input_counts;
      check_buffer(own, op);
      check_root(call.root, op);
      bool root = rank_ == call.root;
      if (root) check_pair_buffers(output, input, op);
      // Off the root the whole is not used: the counts must still add up without wrapping.
      total_of(counts, "counts", root ? whole.count : std::numeric_limits<std::size_t>::max(), op);
      std::size_t mine = own_count(counts, own, gathering ? "input" : "output", op);
      return {.collective = gathering ? Collective::GatherV : Collective::ScatterV,
              .dtype = own.dtype,
              .root = call.root,
              .count = mine,
              .output = gathering && !root ? nullptr : output.data,
              .input = !gathering && !root ? nullptr : input.data,
              .counts = {counts.begin(), counts.end()}};
    }
    case Operation::Barrier: check_member(op); return {.collective = Collective::Barrier};
    case Operation::Send:
    case Operation::Recv: break;
  }
  throw InvalidArgumentError(std::string(op) + " is not a collective", ErrorContext{.rank = rank_, .op = op});
}

Device device_of(const Call& call) {
  // Operation's collectives are Collective's (call_pipeline.cpp); send and recv come here not.
  auto collective = static_cast<Collective>(call.operation);
  bool by_input = device_from_input(collective) || (collective == Collective::AllGather && !call.blocks.empty());
  return by_input ? call.input.device : call.output.device;
}

}  // namespace comm
