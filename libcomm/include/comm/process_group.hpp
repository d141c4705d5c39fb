// Process groups: how ranks find each other and, in later layers, talk.
//
// init_process_group() bootstraps a job the way torch.distributed does: through env://
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, or the variables of mpirun and srun),
// tcp://host:port, file:///path, or a Store the caller brings. It returns once every rank
// has joined, or throws an Error saying which ranks are missing or what disagreed.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "comm/store.hpp"
#include "comm/types.hpp"
#include "comm/work.hpp"

namespace comm {

namespace transport {
class Transport;
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

class ProcessGroup {
 public:
  struct Identity {
    int rank = 0;
    int size = 1;
    int local_rank = -1;  // from LOCAL_RANK and the like; -1 when no launcher said
    int local_size = -1;
    std::string name{};   // the store prefix of this group
  };

  ProcessGroup(Identity identity, std::shared_ptr<Store> store, std::shared_ptr<transport::Transport> transport,
               std::chrono::milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

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

  // Point to point. Messages from one rank to another with one tag arrive in the order they
  // were sent; a recv from kAnySource reports the sender through Work::source_rank() (the
  // blocking recv returns it). The receive buffer must be at least as large as the message:
  // a smaller one is an error on both sides, never a silent truncation. Tags are >= 0.
  void send(Buffer buffer, int dst, int tag = 0);
  int recv(Buffer buffer, int src, int tag = 0);
  std::shared_ptr<Work> isend(Buffer buffer, int dst, int tag = 0);
  std::shared_ptr<Work> irecv(Buffer buffer, int src, int tag = 0);

  // Collectives: every rank of the group calls them in the same order.
  // all_reduce: in place; afterwards every rank holds bitwise-identical bytes.
  void all_reduce(Buffer buffer, ReduceOp op = ReduceOp::Sum);

  // Fails every pending operation of this group; later calls fail at once.
  void abort();

 private:
  Work start_send(Buffer buffer, int dst, int tag);
  Work start_recv(Buffer buffer, int src, int tag);
  void check_buffer(const Buffer& buffer, const char* op) const;
  void check_peer(int peer, const char* op, bool any_source_allowed) const;
  void check_tag(int tag, const char* op) const;

  Identity identity_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<transport::Transport> transport_;
  std::chrono::milliseconds timeout_;
  std::atomic<std::uint64_t> collective_sequence_{0};
};

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

}  // namespace comm
