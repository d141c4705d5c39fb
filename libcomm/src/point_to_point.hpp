// A group's send and recv, on host buffers (point_to_point.cpp: one transport call each) and on
// GPU buffers (device_point_to_point.cpp: CUDA IPC or staged, in issue order per peer lane).
// start gives the i-form's Work; run is the same transfer waited on, its Work on the stack.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "comm/call.hpp"
#include "comm/work.hpp"
#include "libcomm/src/call_checks.hpp"
#include "libcomm/src/completion_work.hpp"
#include "libcomm/base/flight_recorder.hpp"
#include "libcomm/src/group_devices.hpp"
#include "libcomm/src/group_layout.hpp"
#include "transport/transport.hpp"

namespace comm {

class PointToPoint {
 public:
  PointToPoint(int rank, std::chrono::milliseconds timeout, const GroupLayout& layout, transport::Transport& transport,
               const CallChecks& checks, GroupDevices& devices)
      : rank_(rank), timeout_(timeout), layout_(layout), transport_(transport), checks_(checks), devices_(devices) {}

  std::shared_ptr<Work> start(const Call& call);
  // Returns the source rank of a recv (the peer named, or the sender for kAnySource); else -1.
  int run(const Call& call);
  // The blocking forms, also without a Call: ProcessGroup::send and recv, the path of every
  // small message (docs/design/latency.md). recv returns the source rank.
  void send(const Buffer& buffer, int dst, int tag);
  int recv(const Buffer& buffer, int src, int tag);
  // The group's index in the flight recorder, which its transfers' entries carry.
  void trace_as(std::uint16_t group) { trace_group_ = group; }

 private:
  trace::Handle trace_begin(Operation operation, const Buffer& buffer, int peer, int tag, std::uint8_t flags) const {
    return trace::begin(trace_group_, static_cast<std::uint8_t>(operation), static_cast<std::uint64_t>(tag),
                        buffer.count, static_cast<std::int8_t>(buffer.dtype), 0, peer, flags);
  }
  // `entry`: the i-form's flight recorder entry, finished by its Work (none for a blocking call).
  detail::CompletionWork start_send(Buffer buffer, int dst, int tag, trace::Handle entry);
  detail::CompletionWork start_recv(Buffer buffer, int src, int tag, trace::Handle entry);
  // A small message the transport takes at once needs no Completion: the Work is done already.
  bool send_at_once(const Buffer& buffer, int dst, int tag);
  int wait_recv(Buffer buffer, int src, int tag);
  // A send the transport did not take at once (or a GPU one), waited for.
  void send_and_wait(const Buffer& buffer, int dst, int tag);
  int recv_on_gpu(const Buffer& buffer, int src, int tag);

  // A GPU send/recv, checked, on its lane (device_point_to_point.cpp).
  struct GpuTransfer;
  GpuTransfer prepare_gpu_transfer(const Call& call);
  // `entry`: its flight recorder entry, finished by the returned Work.
  std::shared_ptr<Work> start_gpu_transfer(const Call& call, trace::Handle entry);
  int run_gpu_transfer(const Call& call);
  // The transfer on one path: (bytes moved, source rank).
  std::pair<std::size_t, int> staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                              bool receiving);
  std::pair<std::size_t, int> ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                           bool receiving);

  // The buffer a transfer moves: a send's input, a recv's output.
  static const Buffer& moved(const Call& call) { return call.operation == Operation::Send ? call.input : call.output; }
  // kAnySource stays itself; a named group rank becomes its transport rank.
  int source_rank_of(int src) const { return src == kAnySource ? src : layout_.transport_rank(src); }
  // User tags are >= 0 ints (31 bits); the group id sits above them, below the collective bit.
  // Inline: two per message.
  std::uint64_t tag_of(int tag) const {
    return (std::uint64_t{layout_.id & 0x7FFF} << transport::kGroupIdShift) | static_cast<std::uint64_t>(tag);
  }

  int rank_;
  std::chrono::milliseconds timeout_;
  const GroupLayout& layout_;
  transport::Transport& transport_;
  const CallChecks& checks_;
  GroupDevices& devices_;
  std::uint16_t trace_group_ = 0;
};

}  // namespace comm
