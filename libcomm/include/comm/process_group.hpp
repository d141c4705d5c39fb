// Process groups: the ranks of a job, and everything they do together.
//
// init_process_group() bootstraps a job the way torch.distributed does: through env://
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, or the variables of mpirun and srun, which also
// say where the store is when MASTER_* are unset), tcp://host:port, file:///path, a multicast
// group (tcp://MULTICAST_ADDRESS:port), or a Store the caller brings. It returns once every rank
// has joined, or throws an Error saying which ranks are missing or what disagreed. The group
// then sends, receives and runs collectives; new_group() makes groups of some of its ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/call.hpp"
#include "comm/prepared_call.hpp"
#include "comm/store.hpp"
#include "comm/types.hpp"
#include "comm/work.hpp"

namespace comm {

struct InitOptions {
  // env:// | tcp://host:port | file:///path | tcp://MULTICAST_ADDRESS:port (processes find each
  // other on an IP multicast group; docs/bootstrap.md)
  std::string init_method = "env://";
  // -1: from the URL's query or the environment. A rank no one gives is handed out in arrival
  // order through file://, tcp:// and a store (every process of the job must leave it out).
  int rank = -1, world_size = -1;
  std::chrono::milliseconds timeout = std::chrono::minutes(30);  // COMM_TIMEOUT (s) overrides
  std::string group_name{};        // lets several jobs share one file://, store or multicast group
  std::shared_ptr<Store> store{};  // or bring your own store (init_method is then ignored)
  std::string transport = "auto";  // auto | tcp | shm | memory (threads of one process)
  // The secret the job's store and connections prove (TcpStoreOptions::job_secret); unset:
  // COMM_JOB_TOKEN (or COMM_JOB_TOKEN_FILE), else a random one agreed through the store.
  std::optional<std::string> job_secret{};
  // A newcomer to a running job: the name of the job's group to join ("default_pg" unless the
  // job set group_name). Init then waits for the group's ranks to call grow(), takes the next
  // place it opened (its rank: after theirs) and returns the grown group; rank and world_size
  // are not given. The store is found as usual (env://, tcp://, a store); the job secret too.
  std::string join{};
};

class ProcessGroup {
 public:
  class Impl;  // the library's side; programs get groups from init_process_group and new_group
  explicit ProcessGroup(std::unique_ptr<Impl> impl);  // only the library can make an Impl
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // rank() is -1 on a process that is not a member of this group (see new_group).
  int rank() const;
  int size() const;
  int local_rank() const;  // from LOCAL_RANK and the like; -1 when no launcher said
  int local_size() const;
  const std::string& name() const;  // the group's prefix in the job's store
  std::chrono::milliseconds timeout() const;
  // The group's namespace in the job's store (a PrefixStore), for exchanging bootstrap data.
  Store& store() const;
  // "tcp" or "shm": the medium this group's messages travel over.
  const char* transport_name() const;
  // Whether the shared-memory collectives can run: every rank of the group shares this host
  // over shm and the group's segment was made (the algorithm "shared_memory").
  bool shared_memory_usable() const;
  // The name of the algorithm ("ring", "tree", ...) a call of `collective` on this group runs
  // when each rank brings `bytes` (the input of all_reduce, broadcast, reduce and all_gather; the
  // output of reduce_scatter; one block of gather, scatter and all_to_all), given the call's
  // `requested` algorithm (a name; empty: none): what the tuner picks, or COMM_ALGO. A request
  // the collective lacks is an InvalidArgumentError. Calls on GPU buffers take their own paths
  // (docs/cuda.md).
  const char* algorithm_for(Collective collective, std::size_t bytes, std::string_view requested = {}) const;

  // Any call below as one value (comm/call.hpp): start returns its Work at once (the i-form);
  // run is the same call waited on, and returns a recv's source rank (else -1). The per-call
  // forms below are these two with a Call made for you.
  std::shared_ptr<Work> start(const Call& call);
  int run(const Call& call);
  // The same call prepared once to run many times (comm/prepared_call.hpp): its arguments are
  // checked now (an error here, on this rank only: nothing is sent), each run is a collective.
  std::shared_ptr<PreparedCall> prepare(const Call& call);

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
  // `algorithm` overrides the tuner for this call: empty (or "auto") lets the tuner (or COMM_ALGO)
  // choose; else the name of one of the collective's algorithms, as docs/collectives.md lists
  // them ("ring", "tree", "recursive_doubling", ...). An unknown name, or one the collective
  // lacks, is an InvalidArgumentError.
  //
  // broadcast: root's buffer to everyone.
  void broadcast(Buffer buffer, int root, std::string_view algorithm = {});
  // all_reduce: in place; afterwards every rank holds bitwise-identical bytes.
  void all_reduce(Buffer buffer, ReduceOp op = ReduceOp::Sum, std::string_view algorithm = {});
  // reduce: the result lands in root's buffer; the others' buffers are left as they were.
  void reduce(Buffer buffer, int root, ReduceOp op = ReduceOp::Sum, std::string_view algorithm = {});
  // all_gather: every rank's input, in rank order, into one output per rank or one flat buffer
  // of size() * input.count (in place when input is block rank() of output).
  void all_gather(std::span<Buffer> outputs, Buffer input);
  void all_gather(Buffer output, Buffer input, std::string_view algorithm = {});
  // all_gather_v: the uneven all_gather: counts[r] elements from rank r, packed in rank order in
  // output; this rank's input holds counts[rank()]. The same counts on every rank (else a
  // MismatchError). In place when input is this rank's block of output.
  void all_gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts);
  // reduce_scatter_v: the uneven reduce_scatter: input holds every rank's block (counts[r]
  // elements for rank r, packed in rank order); output gets this rank's block reduced over the
  // ranks. The same counts on every rank. In place when output is this rank's block of input.
  void reduce_scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts,
                        ReduceOp op = ReduceOp::Sum);
  // gather_v: root's output gets counts[r] elements from rank r, packed in rank order; a rank's
  // input holds counts[rank()] (output is ignored on other ranks). The same counts on every rank.
  void gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root);
  // scatter_v: rank r's output gets the counts[r] elements of block r of root's input (packed in
  // rank order; input is ignored on other ranks). The same counts on every rank.
  void scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root);
  // gather: root receives input of rank r into outputs[r] (outputs ignored on other ranks).
  void gather(Buffer input, std::span<Buffer> outputs, int root);
  // scatter: rank r receives inputs[r] of root into output (inputs ignored on other ranks).
  void scatter(Buffer output, std::span<const Buffer> inputs, int root);
  // reduce_scatter: input holds size() blocks of output.count; block r is reduced into rank r's
  // output (in place when output is block rank() of input).
  void reduce_scatter(Buffer output, Buffer input, ReduceOp op = ReduceOp::Sum, std::string_view algorithm = {});
  // all_to_all: block r of input (input.count / size() elements) goes to rank r, landing in
  // block rank() of its output.
  void all_to_all(Buffer output, Buffer input);
  // all_to_all_v: the uneven all_to_all. This rank sends input_counts[r] elements to rank r and
  // receives output_counts[r] from it, blocks packed in rank order in input and output; rank r's
  // input_counts[s] must equal rank s's output_counts[r] (a disagreement fails the call on every
  // rank as a mismatch). In place when output and input are the same buffer.
  void all_to_all_v(Buffer output, std::span<const std::size_t> output_counts, Buffer input,
                    std::span<const std::size_t> input_counts);
  void barrier();

  std::shared_ptr<Work> ibroadcast(Buffer buffer, int root, std::string_view algorithm = {});
  std::shared_ptr<Work> iall_reduce(Buffer buffer, ReduceOp op = ReduceOp::Sum, std::string_view algorithm = {});
  std::shared_ptr<Work> ireduce(Buffer buffer, int root, ReduceOp op = ReduceOp::Sum, std::string_view algorithm = {});
  std::shared_ptr<Work> iall_gather(std::span<Buffer> outputs, Buffer input);
  std::shared_ptr<Work> iall_gather(Buffer output, Buffer input, std::string_view algorithm = {});
  std::shared_ptr<Work> igather(Buffer input, std::span<Buffer> outputs, int root);
  std::shared_ptr<Work> iscatter(Buffer output, std::span<const Buffer> inputs, int root);
  std::shared_ptr<Work> ireduce_scatter(Buffer output, Buffer input, ReduceOp op = ReduceOp::Sum,
                                        std::string_view algorithm = {});
  std::shared_ptr<Work> iall_to_all(Buffer output, Buffer input);
  std::shared_ptr<Work> iall_gather_v(Buffer output, Buffer input, std::span<const std::size_t> counts);
  std::shared_ptr<Work> ireduce_scatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts,
                                          ReduceOp op = ReduceOp::Sum);
  std::shared_ptr<Work> igather_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root);
  std::shared_ptr<Work> iscatter_v(Buffer output, Buffer input, std::span<const std::size_t> counts, int root);
  std::shared_ptr<Work> iall_to_all_v(Buffer output, std::span<const std::size_t> output_counts, Buffer input,
                                      std::span<const std::size_t> input_counts);
  std::shared_ptr<Work> ibarrier();

  // A group of some of this group's ranks (given as ranks of this group, in the order that
  // numbers them in the new group). Every rank of this group calls it, with the same list, in
  // the same order relative to other new_group calls, as in torch.distributed. A rank not in
  // the list gets a group whose rank() is -1 and whose every call is an error. `timeout`: how
  // long the new group's calls wait for their peers (default: this group's timeout()).
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks,
                                          std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // The same group, made the way torch.distributed makes its groups: only the listed ranks call
  // it, each with the same ranks and the same `key`, a name no other group made from this one
  // has (torch's group name, say); the others never hear of it. It shares this group's
  // connections, like the form above. Two keys that land on one internal group id are refused.
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks, std::string_view key,
                                          std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // GPU buffers (Device{Cuda, i}) are ordered against this CUDA stream (a cudaStream_t; the
  // default, nullptr, is the legacy default stream): a call waits for work enqueued on it
  // before, and work enqueued after sees the results. One stream per group. GPU buffers work in
  // every call that takes buffers: through CUDA IPC among ranks on one host, else staged
  // through pinned host memory (COMM_CUDA_PATH=auto, ipc or staging chooses); see docs/cuda.md.
  void set_cuda_stream(void* stream);
  void* cuda_stream() const;

  // Fails every pending operation of this group; later calls fail at once.
  void abort();

  // Recovery from a dead rank (docs/recovery.md). revoke: any member, alone (not collective):
  // every operation pending or later started on this group, on every member, fails with a
  // RevokedError naming this rank and `reason`; the job's other groups carry on. A member's
  // death revokes its groups by itself, with an error naming the dead rank.
  void revoke(std::string reason = {});
  // shrink: called by every survivor (the dead never take part): the survivors agree on who is
  // out (the ranks in `exclude`, which every caller passes alike, and every rank found dead,
  // even one dying during the shrink) and get one new group of the rest, numbered densely in
  // this group's order, over the connections they have. Every survivor gets the same group, or
  // every one an error (and may shrink again). This group is revoked first, if it was not.
  std::shared_ptr<ProcessGroup> shrink(std::vector<int> exclude = {});
  // grow: called by every member, with the same `count`: opens `count` places for new
  // processes, which join with InitOptions::join (a replacement for a dead rank, or more), and
  // returns the group of all of them: this group's ranks keep their numbers, the newcomers
  // follow in the order they joined. Through the job's store (which must still be up: commrun's,
  // comm-store, or a live rank 0's); the grown group has connections of its own.
  std::shared_ptr<ProcessGroup> grow(int count);

 private:
  friend std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options);
  std::unique_ptr<Impl> impl_;
};

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

}  // namespace comm
