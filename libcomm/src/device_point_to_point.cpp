// send, recv, isend, irecv of GPU buffers: through CUDA IPC (both ranks on one host) or staged
// through pinned memory as host messages (which lets a staged receive name kAnySource). One
// device per group; each peer and direction has a lane that keeps its transfers in order.
#include <string>

#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/src/group.hpp"

namespace comm {

detail::GpuLane& ProcessGroup::Impl::gpu_lane(const Buffer& buffer, int peer, bool receiving, const char* op) {
  std::lock_guard lock(gpu_lanes_mutex_);
  auto& lane = gpu_lanes_[{receiving, peer}];
  if (!lane) lane = std::make_unique<detail::GpuLane>(buffer.device.index);
  COMM_CHECK(lane->device == buffer.device.index, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "this group's GPU transfers with rank " + std::to_string(peer) +
                 " use cuda:" + std::to_string(lane->device) + ", not " + to_string(buffer.device) +
                 "; use one device per rank and group");
  return *lane;
}

std::shared_ptr<Work> ProcessGroup::Impl::gpu_transfer(Buffer buffer, int peer, int tag, bool receiving, bool async,
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
  return std::make_shared<detail::CompletionWork>(lane.queue.submit_transfer(task), timeout_,
                                                  detail::WorkLabel{op, rank(), peer, tag, buffer.bytes()});
}

// Staged: the bytes travel as a host message from and into the lane's pinned buffer.
std::pair<std::size_t, int> ProcessGroup::Impl::staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer,
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
  detail::CompletionWork work = start_recv(staged, peer, tag);
  work.wait();
  cuda::copy(buffer.data, staged.data, work.bytes(), lane.device, cuda_stream_);
  return {work.bytes(), work.source_rank()};
}

std::pair<std::size_t, int> ProcessGroup::Impl::ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer,
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
