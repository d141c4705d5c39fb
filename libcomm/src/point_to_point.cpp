// send, recv, isend, irecv: argument checks, then one transport call each.
#include "check.hpp"
#include "completion.hpp"
#include "comm/process_group.hpp"
#include "cuda/memory.hpp"
#include "ipc_collectives.hpp"
#include "ipc_point_to_point.hpp"
#include "staged_collectives.hpp"
#include "transport.hpp"

namespace comm {

void ProcessGroup::check_buffer(const Buffer& buffer, const char* op, bool device_allowed) const {
  check_member(op);
  COMM_CHECK(buffer.data != nullptr || buffer.count == 0, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "the buffer is a null pointer with a count of " + std::to_string(buffer.count));
  if (buffer.device.kind == Device::Kind::Cuda) {
    ErrorContext context{.rank = rank(), .op = op};
    COMM_CHECK(cuda::built_with_cuda(), InvalidArgumentError, context,
               "the buffer is on " + to_string(buffer.device) + " but this libcomm was built without CUDA; rebuild "
               "with nvcc on PATH, or pass host memory");
    int actual = cuda::device_of(buffer.data);
    COMM_CHECK(buffer.count == 0 || actual == buffer.device.index, InvalidArgumentError, context,
               "the buffer is tagged " + to_string(buffer.device) + " but its memory is " +
                   (actual < 0 ? std::string("host memory (or unknown to CUDA)") : "on cuda:" + std::to_string(actual)) +
                   "; tag a buffer with the device its memory is on");
    COMM_CHECK(device_allowed, InvalidArgumentError, context,
               std::string(op) + " does not take GPU buffers yet (send, recv and the collectives but the list form of "
               "all_gather do); copy the data to host memory first");
  } else if (buffer.count > 0 && cuda::devices_present()) {
    // Reading device memory from the host would crash: say what is wrong instead.
    int actual = cuda::device_of(buffer.data);
    COMM_CHECK(actual < 0, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
               "the buffer is tagged cpu but its memory is on cuda:" + std::to_string(actual) +
                   "; pass Device{Device::Kind::Cuda, " + std::to_string(actual) + "} or copy it to host memory");
  }
}

void ProcessGroup::check_peer(int peer, const char* op, bool any_source_allowed) const {
  COMM_CHECK((peer >= 0 && peer < size()) || (any_source_allowed && peer == kAnySource), InvalidArgumentError,
             (ErrorContext{.rank = rank(), .op = op}),
             "rank " + std::to_string(peer) + " is not in this group of " + std::to_string(size()) +
                 " ranks (valid: 0.." + std::to_string(size() - 1) + (any_source_allowed ? ", or kAnySource)" : ")"));
}

void ProcessGroup::check_tag(int tag, const char* op) const {
  COMM_CHECK(tag >= 0, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "tag " + std::to_string(tag) + " is negative; tags are >= 0");
}

// The callers check the arguments first (check_send, check_recv).
Work ProcessGroup::start_send(Buffer buffer, int dst, int tag) {
  return Work(transport_->isend(transport_rank(dst), buffer.data, buffer.bytes(), point_to_point_tag(tag)), timeout_,
              detail::WorkLabel{"send", rank(), dst, tag, buffer.bytes()});
}

Work ProcessGroup::start_recv(Buffer buffer, int src, int tag) {
  return Work(transport_->irecv(source_rank_of(src), buffer.data, buffer.bytes(), point_to_point_tag(tag)), timeout_,
              detail::WorkLabel{"recv", rank(), src, tag, buffer.bytes()});
}

// kAnySource stays itself; a named group rank becomes its transport rank.
int ProcessGroup::source_rank_of(int src) const { return src == kAnySource ? src : transport_rank(src); }

void ProcessGroup::check_send(const Buffer& buffer, int dst, int tag) const {
  check_buffer(buffer, "send");
  check_peer(dst, "send", false);
  check_tag(tag, "send");
}

void ProcessGroup::check_recv(const Buffer& buffer, int src, int tag) const {
  check_buffer(buffer, "recv");
  check_peer(src, "recv", true);
  check_tag(tag, "recv");
  // The transport reports any-source senders by transport rank, which only the world group
  // shares with its ranks.
  COMM_CHECK(src != kAnySource || layout_.members.empty(), InvalidArgumentError, (ErrorContext{.rank = rank(), .op = "recv"}),
             "receiving from kAnySource works on the world group only; name the source rank");
}

// A small message the transport takes at once needs no Completion: the Work is done already.
bool ProcessGroup::send_at_once(const Buffer& buffer, int dst, int tag) {
  return transport_->send_now(transport_rank(dst), buffer.data, buffer.bytes(), point_to_point_tag(tag));
}

std::shared_ptr<Work> ProcessGroup::isend(Buffer buffer, int dst, int tag) {
  check_send(buffer, dst, tag);
  detail::WorkLabel label{"send", rank(), dst, tag, buffer.bytes()};
  if (send_at_once(buffer, dst, tag)) return std::make_shared<Work>(nullptr, timeout_, label);
  return std::make_shared<Work>(start_send(buffer, dst, tag));
}

std::shared_ptr<Work> ProcessGroup::irecv(Buffer buffer, int src, int tag) {
  check_recv(buffer, src, tag);
  return std::make_shared<Work>(start_recv(buffer, src, tag));
}

// The blocking forms keep their Work on the stack: one allocation fewer per message.
void ProcessGroup::send(Buffer buffer, int dst, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_send(buffer, dst, tag);
  check_send(buffer, dst, tag);
  if (send_at_once(buffer, dst, tag)) return;
  start_send(buffer, dst, tag).wait();
}

// The blocking receive waits on a Completion on its own stack: no allocation, no reference
// counting on the path from the message's arrival to the caller. The transport never touches a
// completion after finishing it; one that times out is withdrawn first (or, if its message is
// already on its way in, waited for), so nothing refers to it once this returns.
int ProcessGroup::recv(Buffer buffer, int src, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_recv(buffer, src, tag);
  check_recv(buffer, src, tag);
  int source = source_rank_of(src);
  detail::Completion completion(transport_.get(), source);
  std::shared_ptr<detail::Completion> borrowed(std::shared_ptr<void>(), &completion);  // not owned
  transport_->irecv_into(borrowed, source, buffer.data, buffer.bytes(), point_to_point_tag(tag));
  Work work(borrowed, timeout_, detail::WorkLabel{"recv", rank(), src, tag, buffer.bytes()});
  try {
    work.wait();
  } catch (const TimeoutError&) {
    if (!transport_->cancel(&completion)) completion.wait();  // its message is on its way in
    throw;
  }
  return work.source_rank();
}

// GPU send/recv: through CUDA IPC (both ranks on one host) or staged through pinned memory as
// host messages (which lets a staged receive name kAnySource). One device per group.
void ProcessGroup::check_gpu_transfer(const Buffer& buffer, int peer, int tag, const char* op, GpuPath path) const {
  bool receiving = std::string(op) == "recv";
  check_buffer(buffer, op, true);
  check_peer(peer, op, receiving);
  check_tag(tag, op);
  COMM_CHECK(peer != kAnySource || path == GpuPath::Staging, InvalidArgumentError,
             (ErrorContext{.rank = rank(), .peer = peer, .op = op}),
             "receiving a GPU buffer from kAnySource needs the staged path (COMM_CUDA_PATH=staging); through CUDA "
             "IPC, name the source rank");
  if (receiving) check_recv(Buffer(nullptr, 0, buffer.dtype), peer, tag);  // the any-source rules of host receives
}

namespace {

// A group's state for GPU transfers of one kind, made on first use for the buffer's device.
template <class State>
State& device_state(std::unique_ptr<State>& held, const Buffer& buffer, int rank, const char* op) {
  if (!held) held = std::make_unique<State>(buffer.device.index);
  COMM_CHECK(held->device() == buffer.device.index, InvalidArgumentError, (ErrorContext{.rank = rank, .op = op}),
             "this group's GPU transfers use cuda:" + std::to_string(held->device()) + ", not " +
                 to_string(buffer.device) + "; use one device per rank and group");
  return *held;
}

}  // namespace

algorithms::IpcPointToPoint& ProcessGroup::ipc_transfers(const Buffer& buffer, const char* op) {
  return device_state(ipc_point_to_point_, buffer, rank(), op);
}

algorithms::StagingState& ProcessGroup::staged_transfers(const Buffer& buffer, const char* op) {
  return device_state(staging_point_to_point_, buffer, rank(), op);
}

void ProcessGroup::gpu_send(Buffer buffer, int dst, int tag) {
  GpuPath path = gpu_path("send");
  check_gpu_transfer(buffer, dst, tag, "send", path);
  if (path == GpuPath::Staging) {
    algorithms::StagingState& staging = staged_transfers(buffer, "send");
    Buffer staged = buffer;
    staged.data = staging.host(0, buffer.bytes());
    staged.device = {};
    cuda::copy(staged.data, buffer.data, buffer.bytes(), buffer.device.index, cuda_stream_);  // after the stream's work
    if (!send_at_once(staged, dst, tag)) start_send(staged, dst, tag).wait();
    return;
  }
  auto& transfers = ipc_transfers(buffer, "send");
  try {
    transfers.send(*transport_, transport_rank(dst), buffer.data, buffer.bytes(), point_to_point_tag(tag), cuda_stream_,
                   timeout_);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = rank(), .peer = dst, .op = "send"});
    throw;
  }
}

int ProcessGroup::gpu_recv(Buffer buffer, int src, int tag) {
  GpuPath path = gpu_path("recv");
  check_gpu_transfer(buffer, src, tag, "recv", path);
  if (path == GpuPath::Staging) {
    algorithms::StagingState& staging = staged_transfers(buffer, "recv");
    Buffer staged = buffer;
    staged.data = staging.host(0, buffer.bytes());
    staged.device = {};
    Work work = start_recv(staged, src, tag);
    work.wait();
    cuda::copy(buffer.data, staged.data, work.bytes(), buffer.device.index, cuda_stream_);
    return work.source_rank();
  }
  auto& transfers = ipc_transfers(buffer, "recv");
  try {
    transfers.recv(*transport_, transport_rank(src), buffer.data, buffer.bytes(), point_to_point_tag(tag), cuda_stream_,
                   timeout_);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = rank(), .peer = src, .op = "recv"});
    throw;
  }
  return src;
}

}  // namespace comm
