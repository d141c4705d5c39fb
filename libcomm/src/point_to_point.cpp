// send, recv, isend, irecv: argument checks, then one transport call each.
#include "check.hpp"
#include "completion.hpp"
#include "comm/process_group.hpp"
#include "cuda/memory.hpp"
#include "ipc_collectives.hpp"
#include "gpu_lane.hpp"
#include "transport.hpp"

namespace comm {

void ProcessGroup::check_buffer(const Buffer& buffer, const char* op) const {
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
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_transfer(buffer, dst, tag, false, true);
  check_send(buffer, dst, tag);
  detail::WorkLabel label{"send", rank(), dst, tag, buffer.bytes()};
  if (send_at_once(buffer, dst, tag)) return std::make_shared<Work>(nullptr, timeout_, label);
  return std::make_shared<Work>(start_send(buffer, dst, tag));
}

std::shared_ptr<Work> ProcessGroup::irecv(Buffer buffer, int src, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) return gpu_transfer(buffer, src, tag, true, true);
  check_recv(buffer, src, tag);
  return std::make_shared<Work>(start_recv(buffer, src, tag));
}

// The blocking forms keep their Work on the stack: one allocation fewer per message.
void ProcessGroup::send(Buffer buffer, int dst, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) {
    gpu_transfer(buffer, dst, tag, false, false);
    return;
  }
  check_send(buffer, dst, tag);
  if (send_at_once(buffer, dst, tag)) return;
  start_send(buffer, dst, tag).wait();
}

// The blocking receive waits on a Completion on its own stack: no allocation, no reference
// counting on the path from the message's arrival to the caller. The transport never touches a
// completion after finishing it; one that times out is withdrawn first (or, if its message is
// already on its way in, waited for), so nothing refers to it once this returns.
int ProcessGroup::recv(Buffer buffer, int src, int tag) {
  if (buffer.device.kind == Device::Kind::Cuda) {
    int source = src;
    gpu_transfer(buffer, src, tag, true, false, &source);
    return source;
  }
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
  check_peer(peer, op, receiving);
  check_tag(tag, op);
  COMM_CHECK(peer != kAnySource || path == GpuPath::Staging, InvalidArgumentError,
             (ErrorContext{.rank = rank(), .peer = peer, .op = op}),
             "receiving a GPU buffer from kAnySource needs the staged path (COMM_CUDA_PATH=staging); through CUDA "
             "IPC, name the source rank");
  if (receiving) check_recv(Buffer(nullptr, 0, buffer.dtype), peer, tag);  // the any-source rules of host receives
}

detail::GpuLane& ProcessGroup::gpu_lane(const Buffer& buffer, int peer, bool receiving, const char* op) {
  std::lock_guard lock(gpu_lanes_mutex_);
  auto& lane = gpu_lanes_[{receiving, peer}];
  if (!lane) lane = std::make_unique<detail::GpuLane>(buffer.device.index);
  COMM_CHECK(lane->device == buffer.device.index, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "this group's GPU transfers with rank " + std::to_string(peer) + " use cuda:" +
                 std::to_string(lane->device) + ", not " + to_string(buffer.device) +
                 "; use one device per rank and group");
  return *lane;
}

std::shared_ptr<Work> ProcessGroup::gpu_transfer(Buffer buffer, int peer, int tag, bool receiving, bool async,
                                                 int* source) {
  const char* op = receiving ? "recv" : "send";
  check_buffer(buffer, op);  // before choosing a path: a build without CUDA says so first
  GpuPath path = gpu_path(op);
  check_gpu_transfer(buffer, peer, tag, op, path);
  detail::GpuLane& lane = gpu_lane(buffer, peer, receiving, op);
  auto task = [this, &lane, buffer, peer, tag, receiving, path, op] {
    try {
      auto [bytes, source] = path == GpuPath::Staging ? staged_transfer(lane, buffer, peer, tag, receiving)
                                                      : ipc_transfer(lane, buffer, peer, tag, receiving);
      return detail::CollectiveQueue::Moved{bytes, source};
    } catch (Error& error) {
      error.add_context(ErrorContext{.rank = rank(), .peer = peer, .op = op});
      throw;
    }
  };
  if (!async) {
    detail::CollectiveQueue::Moved moved;
    lane.queue.run([&] { moved = task(); });
    if (source != nullptr) *source = moved.source;
    return nullptr;
  }
  return std::make_shared<Work>(lane.queue.submit_transfer(task), timeout_,
                                detail::WorkLabel{op, rank(), peer, tag, buffer.bytes()});
}

// Staged: the bytes travel as a host message from and into the lane's pinned buffer.
std::pair<std::size_t, int> ProcessGroup::staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer,
                                                         int tag, bool receiving) {
  if (!lane.staging) lane.staging = std::make_unique<algorithms::StagingState>(lane.device);
  Buffer staged = buffer;
  staged.data = lane.staging->host(0, buffer.bytes());
  staged.device = {};
  if (!receiving) {
    cuda::copy(staged.data, buffer.data, buffer.bytes(), lane.device, cuda_stream_);  // after the stream's work
    if (!send_at_once(staged, peer, tag)) start_send(staged, peer, tag).wait();
    return {buffer.bytes(), rank()};
  }
  Work work = start_recv(staged, peer, tag);
  work.wait();
  cuda::copy(buffer.data, staged.data, work.bytes(), lane.device, cuda_stream_);
  return {work.bytes(), work.source_rank()};
}

std::pair<std::size_t, int> ProcessGroup::ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer,
                                                      int tag, bool receiving) {
  if (!lane.ipc) lane.ipc = std::make_unique<algorithms::IpcPointToPoint>(lane.device);
  if (!receiving) {
    lane.ipc->send(*transport_, transport_rank(peer), buffer.data, buffer.bytes(), point_to_point_tag(tag),
                   cuda_stream_, timeout_);
    return {buffer.bytes(), rank()};
  }
  std::size_t bytes = lane.ipc->recv(*transport_, transport_rank(peer), buffer.data, buffer.bytes(),
                                     point_to_point_tag(tag), cuda_stream_, timeout_);
  return {bytes, peer};
}

}  // namespace comm
