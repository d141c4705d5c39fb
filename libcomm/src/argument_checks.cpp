// Every check of a caller's arguments, made on the calling rank before a call starts: a wrong
// argument is an InvalidArgumentError that says what is wrong and what to pass instead, and
// nothing has been sent or posted.
#include <cstdint>
#include <limits>
#include <string>

#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/src/group.hpp"

namespace comm {

void ProcessGroup::Impl::check_member(const char* op) const {
  COMM_CHECK(rank() >= 0, InvalidArgumentError, ErrorContext{.op = op},
             "this process is not a member of group '" + name() +
                 "' (it was left out of the ranks passed to new_group); only members may use the group");
}

void ProcessGroup::Impl::check_buffer(const Buffer& buffer, const char* op) const {
  check_member(op);
  COMM_CHECK(buffer.data != nullptr || buffer.count == 0, InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = op}),
             "the buffer is a null pointer with a count of " + std::to_string(buffer.count));
  // Sizes computed from the count must not wrap around (nor run past the end of the address
  // space): a wrapped size would pass every later check and move the wrong number of bytes.
  auto room = std::numeric_limits<std::uintptr_t>::max() - reinterpret_cast<std::uintptr_t>(buffer.data);
  COMM_CHECK(buffer.count <= room / element_size(buffer.dtype), InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = op}),
             "the buffer's count " + std::to_string(buffer.count) + " of " + to_string(buffer.dtype) +
                 " is more bytes than memory can hold");
  if (buffer.device.kind == Device::Kind::Cuda) {
    ErrorContext context{.rank = rank(), .op = op};
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
    COMM_CHECK(actual < 0, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
               "the buffer is tagged cpu but its memory is on cuda:" + std::to_string(actual) +
                   "; pass Device{Device::Kind::Cuda, " + std::to_string(actual) + "} or copy it to host memory");
  }
}

void ProcessGroup::Impl::check_peer(int peer, const char* op, bool any_source_allowed) const {
  COMM_CHECK((peer >= 0 && peer < size()) || (any_source_allowed && peer == kAnySource), InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = op}),
             "rank " + std::to_string(peer) + " is not in this group of " + std::to_string(size()) +
                 " ranks (valid: 0.." + std::to_string(size() - 1) + (any_source_allowed ? ", or kAnySource)" : ")"));
}

void ProcessGroup::Impl::check_tag(int tag, const char* op) const {
  COMM_CHECK(tag >= 0, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "tag " + std::to_string(tag) + " is negative; tags are >= 0");
}

void ProcessGroup::Impl::check_send(const Buffer& buffer, int dst, int tag) const {
  check_buffer(buffer, "send");
  check_peer(dst, "send", false);
  check_tag(tag, "send");
}

void ProcessGroup::Impl::check_recv(const Buffer& buffer, int src, int tag) const {
  check_buffer(buffer, "recv");
  check_peer(src, "recv", true);
  check_tag(tag, "recv");
  // The transport reports any-source senders by transport rank, which only the world group
  // shares with its ranks.
  COMM_CHECK(src != kAnySource || layout_.members.empty(), InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = "recv"}),
             "receiving from kAnySource works on the world group only; name the source rank");
}

void ProcessGroup::Impl::check_gpu_transfer(const Buffer& buffer, int peer, int tag, const char* op,
                                            GpuPath path) const {
  bool receiving = std::string(op) == "recv";
  check_peer(peer, op, receiving);
  check_tag(tag, op);
  COMM_CHECK(peer != kAnySource || path == GpuPath::Staging, InvalidArgumentError,
             (ErrorContext{.rank = rank(), .peer = peer, .op = op}),
             "receiving a GPU buffer from kAnySource needs the staged path (COMM_CUDA_PATH=staging); through CUDA "
             "IPC, name the source rank");
  if (receiving) check_recv(Buffer(nullptr, 0, buffer.dtype), peer, tag);  // the any-source rules of host receives
}

void ProcessGroup::Impl::check_root(int root, const char* op) const {
  COMM_CHECK(root >= 0 && root < size(), InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size()) +
                 " ranks (valid: 0.." + std::to_string(size() - 1) + ")");
}

void ProcessGroup::Impl::check_pair(const Buffer& output, const Buffer& input, const char* op) const {
  COMM_CHECK(output.dtype == input.dtype, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             std::string("the input is ") + to_string(input.dtype) + " and the output " + to_string(output.dtype) +
                 "; both must have the same dtype");
  COMM_CHECK(output.device.kind == input.device.kind && output.device.index == input.device.index, InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = op}),
             "the input is on " + to_string(input.device) + " and the output on " + to_string(output.device) +
                 "; one call takes buffers of one device (mixing host and GPU memory is not allowed)");
}

void ProcessGroup::Impl::check_pair_buffers(const Buffer& output, const Buffer& input, const char* op) const {
  check_member(op);
  check_pair(output, input, op);
  check_buffer(output, op);
  check_buffer(input, op);
}

void ProcessGroup::Impl::check_count(bool ok, const char* op, const std::string& message) const {
  COMM_CHECK(ok, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}), message);
}

void ProcessGroup::Impl::check_blocks(std::span<const Buffer> blocks, const Buffer& own, bool outputs,
                                      const char* op) const {
  std::string who = std::string(op) == "all_gather" ? "got " : "the root got ";
  check_count(blocks.size() == static_cast<std::size_t>(size()), op,
              who + std::to_string(blocks.size()) + (outputs ? " output" : " input") + " buffers; pass one per rank (" +
                  std::to_string(size()) + ")");
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

}  // namespace comm
