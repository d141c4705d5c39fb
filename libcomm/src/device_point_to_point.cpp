// send, recv, isend, irecv of GPU buffers: through CUDA IPC (both ranks on one host) or staged
// through pinned memory as host messages (which lets a staged receive name kAnySource). One
// device per group; each peer and direction has a lane that keeps its transfers in order.
#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/src/point_to_point.hpp"

namespace comm {

struct PointToPoint::GpuTransfer {
  detail::GpuLane& lane;
  PointToPoint& owner;
  Buffer buffer;
  int peer, tag;
  bool receiving, staged;

  const char* op() const { return receiving ? "recv" : "send"; }
  detail::CollectiveQueue::Moved operator()() const {
    try {
      auto [bytes, source] = staged ? owner.staged_transfer(lane, buffer, peer, tag, receiving)
                                    : owner.ipc_transfer(lane, buffer, peer, tag, receiving);
      return {bytes, source};
    } catch (Error& error) {
      error.add_context(ErrorContext{.rank = owner.rank_, .peer = peer, .op = op()});
      throw;
    }
  }
};

PointToPoint::GpuTransfer PointToPoint::prepare_gpu_transfer(const Call& call) {
  bool receiving = call.operation == Operation::Recv;
  const Buffer& buffer = moved(call);
  const char* op = receiving ? "recv" : "send";
  checks_.check_buffer(buffer, op);  // before choosing a path: a build without CUDA says so first
  bool staged = devices_.path(op) == algorithms::DevicePath::Staging;
  checks_.gpu_transfer(call.root, call.tag, receiving, staged);
  return {devices_.lane(buffer, call.root, receiving, op), *this, buffer, call.root, call.tag, receiving, staged};
}

std::shared_ptr<Work> PointToPoint::start_gpu_transfer(const Call& call, trace::Handle entry) {
  GpuTransfer transfer = prepare_gpu_transfer(call);
  return std::make_shared<detail::CompletionWork>(
      transfer.lane.queue.submit_transfer(transfer), timeout_,
      detail::WorkLabel{transfer.op(), rank_, transfer.peer, transfer.tag, transfer.buffer.bytes()}, entry);
}

int PointToPoint::run_gpu_transfer(const Call& call) {
  GpuTransfer transfer = prepare_gpu_transfer(call);
  detail::CollectiveQueue::Moved moved;
  transfer.lane.queue.run([&] { moved = transfer(); });
  return transfer.receiving ? moved.source : -1;
}

// Staged: the bytes travel as a host message from and into the lane's pinned buffer.
std::pair<std::size_t, int> PointToPoint::staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer,
                                                          int tag, bool receiving) {
  if (!lane.staging) lane.staging = std::make_unique<algorithms::StagingState>(lane.device);
  Buffer staged = buffer;
  staged.data = lane.staging->host(0, buffer.bytes());
  staged.device = {};
  void* stream = devices_.stream();
  if (!receiving) {
    cuda::copy(staged.data, buffer.data, buffer.bytes(), lane.device, stream);  // after the stream's work
    if (!send_at_once(staged, peer, tag)) start_send(staged, peer, tag, {}).wait();
    return {buffer.bytes(), rank_};
  }
  detail::CompletionWork work = start_recv(staged, peer, tag, {});
  work.wait();
  cuda::copy(buffer.data, staged.data, work.bytes(), lane.device, stream);
  return {work.bytes(), work.source_rank()};
}

std::pair<std::size_t, int> PointToPoint::ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                                       bool receiving) {
  if (!lane.ipc) lane.ipc = std::make_unique<algorithms::IpcPointToPoint>(lane.device);
  int to = layout_.transport_rank(peer);
  if (!receiving) {
    lane.ipc->send(transport_, to, buffer.data, buffer.bytes(), tag_of(tag), devices_.stream(), timeout_);
    return {buffer.bytes(), rank_};
  }
  std::size_t bytes =
      lane.ipc->recv(transport_, to, buffer.data, buffer.bytes(), tag_of(tag), devices_.stream(), timeout_);
  return {bytes, peer};
}

}  // namespace comm
