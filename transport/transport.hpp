// The interface algorithms and the point-to-point API use to move bytes between ranks,
// whatever the medium (TCP, shared memory, CUDA IPC).
//
// Every transfer is tagged; messages between one pair of ranks with one tag are delivered in
// the order they were sent, and receives match them in the order they were posted. A receive
// from kAnySource matches the first message with its tag from any peer. Completions are
// reported through detail::Completion (behind comm::Work); a transport drives its transfers
// from its own progress thread and from threads waiting on them, never from a thread per
// transfer. All methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "comm/types.hpp"
#include "transport/shared_arena.hpp"

#include "libcomm/base/completion.hpp"
#include "transport/group_control.hpp"

namespace comm::transport {

constexpr int kAnySource = -1;

// How a receive can combine what arrives with what its buffer already holds (buffer = buffer op
// message, element by element) instead of overwriting it (irecv_reduce): the one interface the
// algorithms hand down to the message layer (docs/design/transport.md, "Who calls whom"). The
// transport hands the bytes to the function as they come off the medium, straight from shared
// memory where it can, so a ring's reduce-scatter needs no scratch buffer and no second pass
// over it. Transports know nothing of arithmetic: the caller supplies the function
// (algorithms/reduce.hpp's, in practice).
// target[i] = target[i] op incoming[i] for i < count; both aligned to the element size.
using CombineFunction = void (*)(void* target, const void* incoming, std::size_t count, DType dtype, ReduceOp op);

struct Combiner {
  CombineFunction combine = nullptr;
  DType dtype = DType::UInt8;
  ReduceOp op = ReduceOp::Sum;
  std::size_t element = 1;  // bytes per element

  explicit operator bool() const { return combine != nullptr; }
  void operator()(void* target, const void* incoming, std::size_t count) const {
    combine(target, incoming, count, dtype, op);
  }
};

// target = target op run, `elements` of them; `run` need not be aligned to the element size
// (bytes that follow a message of odd length in a stream are not), `target` must be. Defined
// with the stream that reads such runs (message/stream_connection.cpp).
void combine_run(const Combiner& reduction, std::uint8_t* target, const std::uint8_t* run, std::size_t elements);

// A probe: an empty message of a collective call (top tag bit set) whose low 16 tag bits are
// all ones. A rank waiting long on a peer sends one so that, if the two ranks are waiting on
// each other in different calls (no data would ever flow to compare fingerprints), the peer
// still learns what this rank called. Transports never deliver probes; they only check their
// fingerprint against the receives of the same call.
constexpr std::uint64_t kProbeStep = 0xFFFF;
inline bool is_probe(std::uint64_t tag) { return (tag >> 63) != 0 && (tag & 0xFFFF) == kProbeStep; }

// Groups share one transport; every tag carries its group's id in 15 bits below the top bit
// (the collective bit), so the transport can revoke one group's traffic and keep the others'.
constexpr int kGroupIdShift = 48;
inline std::uint32_t group_of(std::uint64_t tag) { return static_cast<std::uint32_t>(tag >> kGroupIdShift) & 0x7FFF; }

// What a transport offers beyond messages, asked for by what needs it (never guessed from the
// medium's name).
struct Capabilities {
  // Every peer shares this host and is reached through shared memory: map_shared_arena() can
  // make a segment for any group of this transport's ranks, and CUDA IPC can reach their devices.
  bool same_host_shared_memory = false;
};

class Transport : public detail::Progressor {
 public:
  ~Transport() override = default;

  virtual Capabilities capabilities() const { return {}; }
  // The host of each transport rank, numbered from 0 in the order of each host's lowest rank
  // (ranks of one host_identity(): one machine and network namespace, or one COMM_HOST_ID);
  // what hierarchical algorithms split a group by. Empty where unknown.
  virtual std::span<const int> hosts() const { return {}; }
  // A segment every rank of a group maps (transport/shared_arena.hpp). Collective over the
  // group's ranks: each calls it with its group `rank` of `size`, in the same order, and `key`
  // tells the group's arenas apart in `store`. Null on every rank when this transport cannot
  // (capabilities().same_host_shared_memory is false) or one rank could not map it (logged).
  virtual std::unique_ptr<SharedArena> map_shared_arena(Store& /*store*/, const std::string& /*key*/, int /*rank*/,
                                                        int /*size*/, std::chrono::milliseconds /*timeout*/,
                                                        std::size_t /*slot_bytes*/ = SharedArena::kSlotBytes) {
    return nullptr;
  }

  // `fingerprint` (0: none) describes the collective call a message belongs to
  // (detail::fingerprint): a receive whose fingerprint differs from the message's, or from that
  // of any message of the same call (same tag above the low 16 bits) from its peer, fails with
  // a MismatchError that describes both calls, instead of matching garbage or waiting forever.
  // Beyond that, the transport remembers the calls this rank sent or received in: a message of
  // one of them from any peer that disagrees (here already, or arriving later, even after the
  // call finished here, even when no receive will ever match it) stops the transport with that
  // MismatchError, as abort() does, so a call never silently pairs with another.
  virtual std::shared_ptr<detail::Completion> isend(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                                                    std::uint64_t fingerprint = 0) = 0;
  // A small send the transport can take at once, with nothing for the caller to wait on: true
  // when the message was handed over (the caller's buffer may be reused at once); false when
  // nothing was sent (too large, the peer's queue is busy, or an error isend will report).
  virtual bool send_now(int /*peer*/, const void* /*data*/, std::size_t /*bytes*/, std::uint64_t /*tag*/,
                        std::uint64_t /*fingerprint*/ = 0) {
    return false;
  }
  // peer may be kAnySource; the completion's source() says who sent the message.
  virtual std::shared_ptr<detail::Completion> irecv(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                                    std::uint64_t fingerprint = 0) = 0;
  // Why nothing more can be exchanged with `peer` (it was lost, or this transport aborted), or
  // null. For waits outside the transport (shared-memory flags) to notice a dead peer.
  virtual std::exception_ptr failure(int /*peer*/) { return nullptr; }
  // A MismatchError when a message or probe from `peer` of the same collective call as `tag`
  // carries another fingerprint than `fingerprint`, else null. For calls that do not exchange
  // messages (shared-memory collectives) to still name what a peer stuck elsewhere called.
  virtual std::exception_ptr conflict(int /*peer*/, std::uint64_t /*tag*/, std::uint64_t /*fingerprint*/) {
    return nullptr;
  }
  // An irecv that combines the message into `data` (data = data op message) instead of
  // overwriting it; null when this transport cannot (or would gain nothing, for this peer), and
  // the caller receives into scratch and reduces itself. A message of fewer bytes than
  // `capacity` combines into its first bytes.
  virtual std::shared_ptr<detail::Completion> irecv_reduce(int /*peer*/, void* /*data*/, std::size_t /*capacity*/,
                                                           std::uint64_t /*tag*/, const Combiner& /*reduction*/,
                                                           std::uint64_t /*fingerprint*/ = 0) {
    return nullptr;
  }
  // irecv into a completion the caller made (one on its stack, say: the transport never touches
  // a completion after completing or failing it).
  virtual void irecv_into(std::shared_ptr<detail::Completion> completion, int peer, void* data, std::size_t capacity,
                          std::uint64_t tag, std::uint64_t fingerprint = 0) = 0;
  // Withdraws a posted receive that no message has matched yet: true when it was withdrawn
  // (or is done already); false when a message is on its way into it (it will complete or fail).
  virtual bool cancel(const detail::Completion* /*completion*/) { return false; }
  // "rank 3 (host:pid)", for messages.
  virtual std::string peer_name(int peer) const = 0;
  virtual const char* medium() const = 0;
  // Reads whatever has arrived from every peer now, and returns why this transport stopped (or
  // null). For calls that exchange no messages (the shared-memory collectives): what a peer sent
  // before it reached the call's synchronisation is here once the call has synchronised, so a
  // message of a disagreeing earlier call is noticed in this call, not some time later.
  virtual std::exception_ptr poll() { return nullptr; }
  // False when poll() has nothing to find: no message-based call was made since it last looked
  // and the transport has not stopped. One load, so shared-memory calls that follow each other
  // pay nothing more for the check (the 8-byte all_reduce is a few hundred nanoseconds).
  bool poll_due() const { return poll_due_.load(std::memory_order_relaxed); }
  // Fails every pending transfer with the reason; later calls fail at once. Peers are told
  // the reason, and fail what they have pending with this rank. `cause` (when given) is the
  // error that made this rank stop: peers fail with an error of its kind and its message, so a
  // MismatchError found on one rank is a MismatchError on every rank.
  virtual void abort(const std::string& reason, const Error* cause = nullptr) = 0;

  // The groups sharing this transport: their members, revocation, shrink's agreement
  // (group_control.hpp). A transport without groups offers the defaults there.
  virtual GroupControl& groups() {
    static GroupControl none;
    return none;
  }
  // Whether any group of this transport was revoked: one load, so the hot path skips the rest.
  bool revoked_any() const { return revoked_any_.load(std::memory_order_relaxed); }

 protected:
  std::atomic<bool> poll_due_{false};  // set and cleared by the implementation, under its lock
  std::atomic<bool> revoked_any_{false};
};

}  // namespace comm::transport
