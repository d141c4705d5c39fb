// ProcessGroup::Impl: what a process group is inside the library. The public ProcessGroup
// forwards every call here (process_group.cpp); the work is spread by responsibility:
//   group.cpp                  making groups (init, new_group), the GPU path, the tuner query
//   argument_checks.cpp        every check of a caller's arguments, before anything starts
//   collectives.cpp            each collective: its checks, then the host or the device form
//   host_collectives.cpp       host buffers: the tuner's algorithm over the transport
//   device_collectives.cpp     GPU buffers: CUDA IPC or staging through pinned host memory
//   point_to_point.cpp         send/recv of host buffers
//   device_point_to_point.cpp  send/recv of GPU buffers (per-peer lanes)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/collective_context.hpp"
#include "algorithms/device/ipc_collectives.hpp"
#include "algorithms/device/staged_collectives.hpp"
#include "algorithms/hierarchical.hpp"
#include "algorithms/scratch.hpp"
#include "algorithms/tuner.hpp"
#include "comm/process_group.hpp"
#include "libcomm/base/algorithm.hpp"
#include "libcomm/src/collective_queue.hpp"
#include "libcomm/src/completion_work.hpp"
#include "libcomm/src/gpu_lane.hpp"
#include "libcomm/src/hang_watch.hpp"
#include "transport/transport.hpp"

namespace comm {

// Where a group sits inside the transport it shares with its parent (new_group).
struct GroupLayout {
  std::uint32_t id = 0;        // 0: the world group; tags carry it, so groups never cross-talk
  std::vector<int> members{};  // group rank -> transport rank; empty: the same numbering
};

// Where the first error while making the group with this id is published (rendezvous/join.hpp).
inline std::string join_failure_key(std::uint32_t group_id) { return "failure/" + std::to_string(group_id); }

// Throws PeerClosedError naming the first member (a group rank) the transport has lost, saying
// it happened while `phase`, unless `excused` says that member may have left (it finished its
// part). For the waits of making a group, which would otherwise last until the timeout.
void check_members_alive(transport::Transport& transport, const std::vector<int>& members, int size, int rank,
                         const std::string& phase, const std::function<bool(int)>& excused = {});

class ProcessGroup::Impl {
 public:
  struct Identity {
    int rank = 0;
    int size = 1;
    int local_rank = -1;  // from LOCAL_RANK and the like; -1 when no launcher said
    int local_size = -1;
    std::string name{};  // the store prefix of this group
  };

  // Collective over the group's members when the transport can map a shared segment (every
  // member constructs its group at the same point: init_process_group, new_group).
  Impl(Identity identity, std::shared_ptr<Store> store, std::shared_ptr<transport::Transport> transport,
       std::chrono::milliseconds timeout, GroupLayout layout = {});
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const Identity& identity() const { return identity_; }
  int rank() const { return identity_.rank; }
  int size() const { return identity_.size; }
  const std::string& name() const { return identity_.name; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Store& store() const { return *store_; }
  const char* transport_name() const { return transport_->medium(); }
  bool shared_memory_usable() const { return size() == 1 || arena_ != nullptr; }
  Algorithm algorithm_for(Collective collective, std::size_t bytes, Algorithm requested) const;
  // The algorithm and its chunks (algorithms/tuner.hpp).
  algorithms::Choice choose(Collective collective, std::size_t bytes, Algorithm requested) const;
  // Collective, once, on the world group of a job that spans hosts: the link between them, from
  // COMM_LINK_GBPS or measured (algorithms/link_model.hpp). Groups made from it inherit it.
  void read_link();
  // `key`: made by its members only (see ProcessGroup::new_group); none: by every rank, in order.
  // `timeout`: the child's, else this group's.
  std::unique_ptr<Impl> new_group(std::vector<int> ranks, std::optional<std::string> key = std::nullopt,
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void abort();
  void set_cuda_stream(void* stream) { cuda_stream_ = stream; }
  void* cuda_stream() const { return cuda_stream_; }

  // Point to point (point_to_point.cpp; GPU buffers in device_point_to_point.cpp).
  void send(Buffer buffer, int dst, int tag);
  int recv(Buffer buffer, int src, int tag);
  std::shared_ptr<Work> isend(Buffer buffer, int dst, int tag);
  std::shared_ptr<Work> irecv(Buffer buffer, int src, int tag);

  // The collectives (collectives.cpp): `async` gives the i-form's Work, else null once done.
  std::shared_ptr<Work> broadcast(Buffer buffer, int root, Algorithm requested, bool async);
  std::shared_ptr<Work> all_reduce(Buffer buffer, ReduceOp op, Algorithm requested, bool async);
  std::shared_ptr<Work> reduce(Buffer buffer, int root, ReduceOp op, Algorithm requested, bool async);
  std::shared_ptr<Work> all_gather(std::span<Buffer> outputs, Buffer input, bool async);
  std::shared_ptr<Work> all_gather(Buffer output, Buffer input, Algorithm requested, bool async);
  std::shared_ptr<Work> gather(Buffer input, std::span<Buffer> outputs, int root, bool async);
  std::shared_ptr<Work> scatter(Buffer output, std::span<const Buffer> inputs, int root, bool async);
  std::shared_ptr<Work> reduce_scatter(Buffer output, Buffer input, ReduceOp op, Algorithm requested, bool async);
  std::shared_ptr<Work> all_to_all(Buffer output, Buffer input, bool async);
  std::shared_ptr<Work> barrier(bool async);

 private:
  // Argument checks (argument_checks.cpp): each throws InvalidArgumentError saying what is wrong.
  void check_member(const char* op) const;
  void check_buffer(const Buffer& buffer, const char* op) const;
  void check_peer(int peer, const char* op, bool any_source_allowed) const;
  void check_tag(int tag, const char* op) const;
  void check_root(int root, const char* op) const;
  // An input and an output of one call: one dtype, one device.
  void check_pair(const Buffer& output, const Buffer& input, const char* op) const;
  // Both buffers usable, and a pair.
  void check_pair_buffers(const Buffer& output, const Buffer& input, const char* op) const;
  void check_count(bool ok, const char* op, const std::string& message) const;
  // gather's outputs or scatter's inputs on the root: one per rank, each paired with `own`
  // (the rank's own buffer) and holding `own.count` elements (at least, for outputs).
  void check_blocks(std::span<const Buffer> blocks, const Buffer& own, bool outputs, const char* op) const;
  void check_send(const Buffer& buffer, int dst, int tag) const;
  void check_recv(const Buffer& buffer, int src, int tag) const;
  // How this group moves GPU buffers, decided on first use from COMM_CUDA_PATH and the
  // transport (IPC when every rank shares the host), and logged once.
  enum class GpuPath { Ipc, Staging };
  GpuPath gpu_path(const char* op);
  // A GPU send/recv's peer and tag (any-source receives only when staging); the buffer is
  // checked before the path is chosen.
  void check_gpu_transfer(const Buffer& buffer, int peer, int tag, const char* op, GpuPath path) const;

  // Host collectives (host_collectives.cpp), arguments checked: the call's algorithm from the
  // table, run through start_collective.
  std::shared_ptr<Work> host_collective(algorithms::HostCall call, Algorithm requested, bool async);

  // GPU collectives (device_collectives.cpp), arguments checked.
  std::shared_ptr<Work> device_broadcast(Buffer buffer, int root, bool async);
  std::shared_ptr<Work> device_all_reduce(Buffer buffer, ReduceOp op, bool async);
  std::shared_ptr<Work> device_reduce(Buffer buffer, int root, ReduceOp op, bool async);
  std::shared_ptr<Work> device_all_gather(Buffer output, Buffer input, bool async);
  std::shared_ptr<Work> device_all_gather(std::vector<void*> outputs, Buffer input, bool async);
  std::shared_ptr<Work> device_gather(Buffer input, std::vector<void*> outputs, int root, bool async);
  std::shared_ptr<Work> device_scatter(Buffer output, std::vector<const void*> inputs, int root, bool async);
  std::shared_ptr<Work> device_reduce_scatter(Buffer output, Buffer input, ReduceOp op, bool async);
  std::shared_ptr<Work> device_all_to_all(Buffer output, Buffer input, bool async);
  struct DeviceCall;
  template <class Ipc, class Staged>
  std::shared_ptr<Work> on_device(const DeviceCall& call, Ipc ipc, Staged staged, bool async);

  // Numbers the call, then runs body(context) now (blocking) or through the group's queue
  // (async); a failure aborts the group (collective_call.hpp).
  template <class Body>
  std::shared_ptr<Work> start_collective(CallShape shape, std::size_t bytes, std::uint64_t fingerprint, Body body,
                                         bool async);

  // Host point to point, arguments checked.
  detail::CompletionWork start_send(Buffer buffer, int dst, int tag);
  detail::CompletionWork start_recv(Buffer buffer, int src, int tag);
  bool send_at_once(const Buffer& buffer, int dst, int tag);
  // GPU send/recv (either path), in issue order per peer and direction: async gives a Work;
  // otherwise it returns null once done, with the source in *source.
  std::shared_ptr<Work> gpu_transfer(Buffer buffer, int peer, int tag, bool receiving, bool async,
                                     int* source = nullptr);
  detail::GpuLane& gpu_lane(const Buffer& buffer, int peer, bool receiving, const char* op);
  // The transfer on one path: (bytes moved, source rank).
  std::pair<std::size_t, int> staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                              bool receiving);
  std::pair<std::size_t, int> ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                           bool receiving);

  int transport_rank(int rank) const;
  int source_rank_of(int src) const;
  std::uint64_t point_to_point_tag(int tag) const;

  Identity identity_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<transport::Transport> transport_;
  std::chrono::milliseconds timeout_;
  GroupLayout layout_;
  std::atomic<std::uint64_t> collective_sequence_{0};
  std::uint32_t groups_created_ = 0;
  std::set<std::uint32_t> child_ids_;                 // of the groups made from this one: an id is never reused
  std::unique_ptr<algorithms::ScratchPool> scratch_;  // the collectives' temporary memory
  std::unique_ptr<transport::SharedArena> arena_;     // shared-memory collectives' segment; null: none
  // The group's ranks by host (for the hierarchical algorithms); usable() only across hosts.
  algorithms::HostLayout host_layout_;
  algorithms::LinkModel link_;                         // unknown on one host
  std::unique_ptr<algorithms::IpcState> ipc_;          // GPU collectives' state, made on first use
  std::unique_ptr<algorithms::StagingState> staging_;  // staged GPU collectives' memory
  std::optional<GpuPath> gpu_path_;
  std::mutex gpu_lanes_mutex_;
  std::map<std::pair<bool, int>, std::unique_ptr<detail::GpuLane>> gpu_lanes_;  // GPU send/recv, by (receiving, peer)
  void* cuda_stream_ = nullptr;
  std::unique_ptr<HangWatch> hang_watch_;           // null for a group of one, or a non-member
  std::unique_ptr<detail::CollectiveQueue> queue_;  // last: its worker may use the members above
};

}  // namespace comm
