// An in-process medium for testing algorithms alone: the ranks of a job are threads of one
// process, a message is copied once from the sender's buffer into the matching receive (or into
// a queue until one is posted), matched by (source, destination, tag) under one lock, and the
// shared arena is one memfd that every rank maps. It implements the whole Transport interface the
// algorithms use (algorithms/collective_context.hpp) and nothing of a real medium: no sockets,
// no processes, no timing, so a test of every algorithm at 1-9 ranks runs in seconds.
//
// A receive whose fingerprint differs from the message's fails with a MismatchError, so a test
// notices ranks that ran different calls. Probes are dropped.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace comm::testing {

class LoopbackTransport;

// The job: what every rank's LoopbackTransport shares. Outlives them.
class LoopbackWorld {
 public:
  // `hosts[r]`: the host of rank r, as Transport::hosts() reports it (empty: one host).
  explicit LoopbackWorld(int ranks, std::vector<int> hosts = {});
  ~LoopbackWorld();
  LoopbackWorld(const LoopbackWorld&) = delete;
  LoopbackWorld& operator=(const LoopbackWorld&) = delete;

  int ranks() const { return ranks_; }
  // Messages sent and never received: a test's algorithms should leave none.
  std::size_t unreceived() const;

 private:
  friend class LoopbackTransport;
  struct Message {
    int source;
    std::uint64_t tag;
    std::uint64_t fingerprint;
    std::vector<std::uint8_t> bytes;
  };
  struct Receive {
    int source;  // or transport::kAnySource
    std::uint64_t tag;
    std::uint64_t fingerprint;
    void* data;
    std::size_t capacity;
    transport::Combiner reduction;
    std::shared_ptr<detail::Completion> completion;
  };
  static bool matches(const Receive& receive, int source, std::uint64_t tag) {
    return (receive.source == source || receive.source == transport::kAnySource) && receive.tag == tag;
  }
  // Completes the receive with the message (under the lock: receives are memory of this process).
  static void deliver(const Receive& receive, const Message& message);
  // The memfd of the arena called `key`, made by the first rank that asks.
  int arena_file(const std::string& key, std::size_t bytes);

  int ranks_;
  std::vector<int> hosts_;
  mutable std::mutex mutex_;
  std::vector<std::deque<Message>> waiting_;  // per destination
  std::vector<std::deque<Receive>> posted_;   // per destination
  std::map<std::string, int> arena_files_;
};

class LoopbackTransport final : public transport::Transport {
 public:
  // `reducing_receives`: how many irecv_reduce calls this rank's transport accepts (-1: all;
  // after that it returns null and the algorithm reduces from scratch itself).
  LoopbackTransport(LoopbackWorld& world, int rank, int reducing_receives = -1);

  transport::Capabilities capabilities() const override { return {.same_host_shared_memory = true}; }
  std::span<const int> hosts() const override { return world_.hosts_; }
  std::unique_ptr<transport::SharedArena> map_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                           std::chrono::milliseconds timeout,
                                                           std::size_t slot_bytes) override;
  std::shared_ptr<detail::Completion> isend(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                                            std::uint64_t fingerprint) override;
  std::shared_ptr<detail::Completion> irecv(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                            std::uint64_t fingerprint) override;
  std::shared_ptr<detail::Completion> irecv_reduce(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                                   const transport::Combiner& reduction,
                                                   std::uint64_t fingerprint) override;
  void irecv_into(std::shared_ptr<detail::Completion> completion, int peer, void* data, std::size_t capacity,
                  std::uint64_t tag, std::uint64_t fingerprint) override;
  bool cancel(const detail::Completion* completion) override;
  bool progress(int, const detail::Completion*) override { return false; }  // senders complete receives
  std::string peer_name(int peer) const override { return "rank " + std::to_string(peer) + " (loopback)"; }
  const char* medium() const override { return "loopback"; }
  void abort(const std::string&, const Error*) override {}

 private:
  void post(LoopbackWorld::Receive receive);

  LoopbackWorld& world_;
  int rank_;
  int reducing_receives_;
};

}  // namespace comm::testing
