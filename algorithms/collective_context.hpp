// What every collective algorithm works with: the group's transport, its place in the group,
// a tag range of its own, and the time it may wait. Algorithms are rank arithmetic plus the
// transfer verbs below; they never see sockets, shared memory or CUDA.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/scratch.hpp"
#include "libcomm/base/completion.hpp"
#include "transport/transport.hpp"

namespace comm::algorithms {

// Tags of collectives have the top bit set, so they never meet point-to-point tags. Below it:
// 15 bits of group id (groups share one transport), 32 bits of the call's sequence number in
// its group, 16 bits of step within the call.
constexpr std::uint64_t kCollectiveTagBit = std::uint64_t{1} << 63;
constexpr int kGroupIdShift = transport::kGroupIdShift;
constexpr std::uint64_t kStepsPerCall = std::uint64_t{1} << 16;
// The top of each call's steps is not the algorithm's: the last is the probe's
// (transport::kProbeStep), the kConfirmSteps below it confirm_call's (small_message.hpp).
constexpr std::uint64_t kConfirmSteps = 32;
constexpr std::uint64_t kAlgorithmSteps = kStepsPerCall - 1 - kConfirmSteps;
// How long a collective waits on a peer before sending it a probe (see transport::is_probe).
constexpr std::chrono::milliseconds kProbeAfter{500};

// Where a rank's current collective waits: written before each wait (two relaxed stores), read
// by the group's hang watch (libcomm/src/hang_watch.hpp) when a call has waited too long.
struct WaitingOn {
  std::atomic<int> peer{-1};  // group rank
  std::atomic<std::uint32_t> step{0};
  void note(int waited_peer, std::uint64_t waited_step) {
    peer.store(waited_peer, std::memory_order_relaxed);
    step.store(static_cast<std::uint32_t>(waited_step), std::memory_order_relaxed);
  }
};

// A transfer in flight; null for a send the transport took at once (nothing to wait for).
using Transfer = std::shared_ptr<detail::Completion>;

struct CollectiveContext {
  transport::Transport& transport;
  int rank;  // in the group
  int size;
  std::uint64_t sequence;  // the call's number in its group, identical on every rank
  std::chrono::milliseconds timeout;
  const char* op;                              // "all_reduce", for errors
  std::uint32_t group_id = 0;                  // 0: the world group
  std::span<const int> members{};              // group rank -> transport rank; empty: the identity
  std::uint64_t step_base = 0;                 // added to every step: lets one call run two algorithms
  std::uint64_t fingerprint = 0;               // what this call is (detail::fingerprint); travels with every message
  ScratchPool* scratch = nullptr;              // the group's; algorithms take their temporary memory here
  WaitingOn* waiting = nullptr;                // the group's record of what this call waits on; null: none
  std::uint64_t step_space = kAlgorithmSteps;  // how many steps from step_base the algorithm may number
  // For a part of the group that an algorithm runs as a group of its own (hierarchical.cpp): its
  // rank -> the rank in the group the call was made on, which errors and the hang watch name.
  // Empty: the identity.
  std::span<const int> caller_ranks{};

  std::uint64_t tag(std::uint64_t step) const {
    return kCollectiveTagBit | (std::uint64_t{group_id & 0x7FFF} << kGroupIdShift) | ((sequence & 0xFFFFFFFF) << 16) |
           ((step_base + step) & 0xFFFF);
  }
  int transport_rank(int peer) const { return members.empty() ? peer : members[static_cast<std::size_t>(peer)]; }
  int wrap(int index) const { return ((index % size) + size) % size; }
  int caller_rank(int peer) const {
    return caller_ranks.empty() || peer < 0 ? peer : caller_ranks[static_cast<std::size_t>(peer)];
  }

  // The transfer verbs: peers are group ranks; `step` tells a call's messages apart.
  Transfer send(int peer, const void* data, std::size_t bytes, std::uint64_t step) const {
    if (transport.send_now(transport_rank(peer), data, bytes, tag(step), fingerprint)) return nullptr;
    Transfer transfer = transport.isend(transport_rank(peer), data, bytes, tag(step), fingerprint);
    // A send that failed at once (the peer is gone, or an earlier message to it was refused)
    // fails the call now: waiting first for a receive that depends on it would never end.
    if (transfer->failed()) wait(transfer, peer, step);
    return transfer;
  }
  Transfer recv(int peer, void* data, std::size_t bytes, std::uint64_t step) const {
    return transport.irecv(transport_rank(peer), data, bytes, tag(step), fingerprint);
  }
  // A receive that reduces the message into `data` (data = data op message) as it arrives, in
  // host memory; null when the transport cannot (then receive into scratch and reduce()).
  Transfer recv_reduce(int peer, void* data, std::size_t bytes, DType dtype, ReduceOp op, std::uint64_t step) const;
  // Waits for a transfer of this collective; a timeout or failure names the peer and step. A
  // wait that lasts (kProbeAfter) sends the peer a probe, so that two ranks waiting on each
  // other in different calls find out (see transport::is_probe).
  void wait(const Transfer& transfer, int peer, std::uint64_t step) const;
  // Tells `peer` what this rank is calling in this slot (fire and forget), so that a peer stuck
  // in another call finds the mismatch.
  void probe(int peer) const {
    transport.isend(transport_rank(peer), nullptr, 0, (tag(0) & ~std::uint64_t{0xFFFF}) | transport::kProbeStep,
                    fingerprint);
  }
  void send_wait(int peer, const void* data, std::size_t bytes, std::uint64_t step) const {
    wait(send(peer, data, bytes, step), peer, step);
  }
  void recv_wait(int peer, void* data, std::size_t bytes, std::uint64_t step) const {
    wait(recv(peer, data, bytes, step), peer, step);
  }
  // For algorithms that exchange no messages (shared memory), once every rank has synchronised:
  // reads what the peers sent before, and fails the call if the transport stopped (a message
  // of an earlier call that disagrees with this rank's, say).
  void check_transport() const {
    if (!transport.poll_due()) return;
    if (std::exception_ptr error = transport.poll()) std::rethrow_exception(error);
  }
  // Sends to one peer and receives from another (or the same) at once; returns when both are done.
  void exchange(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer, void* recv_data,
                std::size_t recv_bytes, std::uint64_t step) const;
};

// Transfers started together and waited for together, each remembered with its peer and step.
class TransferSet {
 public:
  void add(Transfer transfer, int peer, std::uint64_t step) {
    if (transfer) pending_.push_back({std::move(transfer), peer, step});
  }
  void wait_all(const CollectiveContext& context);

 private:
  struct Pending {
    Transfer transfer;
    int peer;
    std::uint64_t step;
  };
  std::vector<Pending> pending_;
};

}  // namespace comm::algorithms
