// Process groups: how ranks find each other and, in later layers, talk.
//
// init_process_group() bootstraps a job the way torch.distributed does: through env://
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, or the variables of mpirun and srun),
// tcp://host:port, file:///path, or a Store the caller brings. It returns once every rank
// has joined, or throws an Error saying which ranks are missing or what disagreed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/store.hpp"
#include "comm/types.hpp"
#include "comm/work.hpp"

namespace comm {

namespace transport {
class Transport;
class SharedArena;
}
namespace algorithms {
struct CollectiveContext;
class ScratchPool;
class IpcState;
class StagingState;
enum class Collective;
}
namespace detail {
class CollectiveQueue;
struct GpuLane;
}

constexpr int kAnySource = -1;

struct InitOptions {
  std::string init_method = "env://";  // env:// | tcp://host:port | file:///path
  int rank = -1, world_size = -1;      // -1: from the URL's query or the environment
  std::chrono::milliseconds timeout = std::chrono::minutes(30);  // COMM_TIMEOUT (s) overrides
  std::string group_name{};            // lets several jobs share one file:// or store
  std::shared_ptr<Store> store{};      // or bring your own store (init_method is then ignored)
  std::string transport = "auto";      // auto | tcp | shm
};

// Where a group sits inside the transport it shares with its parent (new_group).
struct GroupLayout {
  std::uint32_t id = 0;        // 0: the world group; tags carry it, so groups never cross-talk
  std::vector<int> members{};  // group rank -> transport rank; empty: the same numbering
};

class ProcessGroup {
 public:
  struct Identity {
    int rank = 0;
    int size = 1;
    int local_rank = -1;  // from LOCAL_RANK and the like; -1 when no launcher said
    int local_size = -1;
    std::string name{};   // the store prefix of this group
  };

  using Layout = GroupLayout;

  ProcessGroup(Identity identity, std::shared_ptr<Store> store, std::shared_ptr<transport::Transport> transport,
               std::chrono::milliseconds timeout, Layout layout = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // rank() is -1 on a process that is not a member of this group (see new_group).
  int rank() const { return identity_.rank; }
  int size() const { return identity_.size; }
  int local_rank() const { return identity_.local_rank; }
  int local_size() const { return identity_.local_size; }
  const std::string& name() const { return identity_.name; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The group's namespace in the job's store (a PrefixStore), for exchanging bootstrap data.
  Store& store() const { return *store_; }
  // "tcp" or "shm": the medium this group's messages travel over.
  const char* transport_name() const;
  // Whether the shared-memory collectives can run: every rank of the group shares this host
  // over shm and the group's segment was made (Algorithm::SharedMemory).
  bool shared_memory_usable() const;

  // Point to point. Messages from one rank to another with one tag arrive in the order they
  // were sent; a recv from kAnySource reports the sender through Work::source_rank() (the
  // blocking recv returns it). The receive buffer must be at least as large as the message:
  // a smaller one is an error on both sides, never a silent truncation. Tags are >= 0.
  void send(Buffer buffer, int dst, int tag = 0);
  int recv(Buffer buffer, int src, int tag = 0);
  std::shared_ptr<Work> isend(Buffer buffer, int dst, int tag = 0);
  std::shared_ptr<Work> irecv(Buffer buffer, int src, int tag = 0);

  // Collectives: every rank of the group calls them in the same order, with matching
  // arguments. Operations of one group complete in the order they were issued; the i-forms
  // return at once with a Work (their buffers must stay untouched until it completes).
  // `algorithm` overrides the tuner for this call (see docs/collectives.md).
  //
  // broadcast: root's buffer to everyone.
  void broadcast(Buffer buffer, int root, Algorithm algorithm = Algorithm::Auto);
  // all_reduce: in place; afterwards every rank holds bitwise-identical bytes.
  void all_reduce(Buffer buffer, ReduceOp op = ReduceOp::Sum, Algorithm algorithm = Algorithm::Auto);
  // reduce: the result lands in root's buffer; the others' buffers are left as they were.
  void reduce(Buffer buffer, int root, ReduceOp op = ReduceOp::Sum, Algorithm algorithm = Algorithm::Auto);
  // all_gather: every rank's input, in rank order, into one output per rank or one flat buffer
  // of size() * input.count (in place when input is block rank() of output).
  void all_gather(std::span<Buffer> outputs, Buffer input);
  void all_gather(Buffer output, Buffer input, Algorithm algorithm = Algorithm::Auto);
  // gather: root receives input of rank r into outputs[r] (outputs ignored on other ranks).
  void gather(Buffer input, std::span<Buffer> outputs, int root);
  // scatter: rank r receives inputs[r] of root into output (inputs ignored on other ranks).
  void scatter(Buffer output, std::span<const Buffer> inputs, int root);
  // reduce_scatter: input holds size() blocks of output.count; block r is reduced into rank r's
  // output (in place when output is block rank() of input).
  void reduce_scatter(Buffer output, Buffer input, ReduceOp op = ReduceOp::Sum, Algorithm algorithm = Algorithm::Auto);
  // all_to_all: block r of input (input.count / size() elements) goes to rank r, landing in
  // block rank() of its output.
  void all_to_all(Buffer output, Buffer input);
  void barrier();

  std::shared_ptr<Work> ibroadcast(Buffer buffer, int root, Algorithm algorithm = Algorithm::Auto);
  std::shared_ptr<Work> iall_reduce(Buffer buffer, ReduceOp op = ReduceOp::Sum, Algorithm algorithm = Algorithm::Auto);
  std::shared_ptr<Work> ireduce(Buffer buffer, int root, ReduceOp op = ReduceOp::Sum,
                                Algorithm algorithm = Algorithm::Auto);
  std::shared_ptr<Work> iall_gather(std::span<Buffer> outputs, Buffer input);
  std::shared_ptr<Work> iall_gather(Buffer output, Buffer input, Algorithm algorithm = Algorithm::Auto);
  std::shared_ptr<Work> igather(Buffer input, std::span<Buffer> outputs, int root);
  std::shared_ptr<Work> iscatter(Buffer output, std::span<const Buffer> inputs, int root);
  std::shared_ptr<Work> ireduce_scatter(Buffer output, Buffer input, ReduceOp op = ReduceOp::Sum,
                                        Algorithm algorithm = Algorithm::Auto);
  std::shared_ptr<Work> iall_to_all(Buffer output, Buffer input);
  std::shared_ptr<Work> ibarrier();

  // A group of some of this group's ranks (given as ranks of this group, in the order that
  // numbers them in the new group). Every rank of this group calls it, with the same list, in
  // the same order relative to other new_group calls, as in torch.distributed. A rank not in
  // the list gets a group whose rank() is -1 and whose every call is an error.
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks);

  // GPU buffers (Device{Cuda, i}) are ordered against this CUDA stream (a cudaStream_t; the
  // default, nullptr, is the legacy default stream): a call waits for work enqueued on it
  // before, and work enqueued after sees the results. One stream per group. GPU buffers work in
  // every call that takes buffers: through CUDA IPC among ranks on one host, else staged
  // through pinned host memory (COMM_CUDA_PATH=auto, ipc or staging chooses); see docs/cuda.md.
  void set_cuda_stream(void* stream) { cuda_stream_ = stream; }
  void* cuda_stream() const { return cuda_stream_; }

  // Fails every pending operation of this group; later calls fail at once.
  void abort();

 private:
  friend struct CollectiveCalls;  // the argument checks and bodies of the collectives
  // Numbers the call, then runs body(context) now (blocking) or through the group's queue
  // (async). Defined in collectives.cpp, its only user.
  template <class Body>
  std::shared_ptr<Work> start_collective(algorithms::Collective collective, std::size_t bytes, std::uint64_t fingerprint,
                                         Body body, bool async);
  Work start_send(Buffer buffer, int dst, int tag);
  bool send_at_once(const Buffer& buffer, int dst, int tag);
  void check_send(const Buffer& buffer, int dst, int tag) const;
  void check_recv(const Buffer& buffer, int src, int tag) const;
  // How this group moves GPU buffers, decided on first use from COMM_CUDA_PATH and the
  // transport (IPC when every rank shares the host), and logged once.
  enum class GpuPath { Ipc, Staging };
  GpuPath gpu_path(const char* op);
  // send/recv/isend/irecv of GPU buffers (either path), in issue order per peer and direction:
  // async gives a Work; otherwise it returns null once done, with the source in *source.
  std::shared_ptr<Work> gpu_transfer(Buffer buffer, int peer, int tag, bool receiving, bool async,
                                     int* source = nullptr);
  // Checks a GPU send/recv's peer and tag (any-source receives only when staging); the buffer is
  // checked before the path is chosen.
  void check_gpu_transfer(const Buffer& buffer, int peer, int tag, const char* op, GpuPath path) const;
  detail::GpuLane& gpu_lane(const Buffer& buffer, int peer, bool receiving, const char* op);
  // The transfer on one path: (bytes moved, source rank).
  std::pair<std::size_t, int> staged_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                              bool receiving);
  std::pair<std::size_t, int> ipc_transfer(detail::GpuLane& lane, const Buffer& buffer, int peer, int tag,
                                           bool receiving);
  Work start_recv(Buffer buffer, int src, int tag);
  void check_member(const char* op) const;
  void check_buffer(const Buffer& buffer, const char* op) const;
  void check_peer(int peer, const char* op, bool any_source_allowed) const;
  void check_tag(int tag, const char* op) const;
  void check_root(int root, const char* op) const;
  int transport_rank(int rank) const;
  int source_rank_of(int src) const;
  std::uint64_t point_to_point_tag(int tag) const;

  Identity identity_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<transport::Transport> transport_;
  std::chrono::milliseconds timeout_;
  Layout layout_;
  std::atomic<std::uint64_t> collective_sequence_{0};
  std::uint32_t groups_created_ = 0;
  std::unique_ptr<algorithms::ScratchPool> scratch_;  // the collectives' temporary memory
  std::unique_ptr<transport::SharedArena> arena_;     // shared-memory collectives' segment; null: none
  std::unique_ptr<algorithms::IpcState> ipc_;         // GPU collectives' state, made on first use
  std::unique_ptr<algorithms::StagingState> staging_;                // staged GPU collectives' memory
  std::optional<GpuPath> gpu_path_;
  std::mutex gpu_lanes_mutex_;
  std::map<std::pair<bool, int>, std::unique_ptr<detail::GpuLane>> gpu_lanes_;  // GPU send/recv, by (receiving, peer)
  void* cuda_stream_ = nullptr;
  std::unique_ptr<detail::CollectiveQueue> queue_;    // last: its worker may use the members above
};

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

}  // namespace comm
