#include "algorithms/shared_memory.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "algorithms/reduce.hpp"
#include "comm/error.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/oversubscription.hpp"

namespace comm::algorithms {
namespace {

using Clock = std::chrono::steady_clock;
using transport::SharedArena;

// Up to this many bytes a piece is reduced whole by every rank: one synchronisation instead of
// two, and the extra arithmetic is cheaper than a cache-line round trip. Two ranks always do so:
// each reads its peer's slot either way, and skipping the shared result saves a copy and a
// synchronisation (measured: a steady 5-5.6 GB/s busbw at 256 KiB-4 MiB, where reducing by
// segment swung between 1.5 and 7).
constexpr std::size_t kReduceLocallyBytes = 16 * 1024;

std::atomic<std::uint64_t>& flag(SharedArena::Control& control, Flag which) {
  return which == Flag::Arrived ? control.arrived : control.reduced;
}

const char* describe(Flag which) { return which == Flag::Arrived ? "to arrive" : "to reduce its part"; }

ErrorContext error_context(const CollectiveContext& context, int peer) {
  return ErrorContext{
      .rank = context.rank, .peer = peer, .op = context.op, .sequence = static_cast<std::int64_t>(context.sequence)};
}

void rethrow_with_context(const CollectiveContext& context, int peer, const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (Error& cause) {
    cause.add_context(error_context(context, peer));
    throw;
  }
}

// The slow path of a wait on one peer's flag: spin (yielding now and then, for ranks that
// share a core), then nap; a dead peer or an aborted group ends it with the reason, a peer
// that stays away past the timeout with a TimeoutError. A long wait sends the peer a probe, as
// CollectiveContext::wait does, so ranks stuck in different calls learn what the other called.
void wait_for_peer(const CollectiveContext& context, SharedArena& arena, int peer, Flag which, std::uint64_t epoch) {
  auto& word = flag(arena.control(peer), which);
  if (context.waiting != nullptr) context.waiting->note(peer, static_cast<std::uint64_t>(which));
  auto start = Clock::now();
  auto last_check = start;
  bool probed = false;
  for (unsigned round = 1; word.load(std::memory_order_acquire) < epoch; ++round) {
    if ((round & 63) != 0) {
      detail::pause_between_polls();
      continue;
    }
    auto now = Clock::now();
    if (now - start < std::chrono::milliseconds(1)) {
      ::sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (now - last_check < std::chrono::milliseconds(1)) continue;
    last_check = now;
    int transport_peer = context.transport_rank(peer);
    // The group revoked (a member died, or one revoked it): nobody comes. Before the peer's own
    // state: a peer that revoked the group and then left did so over that cause.
    if (context.transport.revoked_any()) {
      if (auto error = context.transport.groups().revocation(context.group_id)) {
        if (word.load(std::memory_order_acquire) >= epoch) break;
        rethrow_with_context(context, peer, error);
      }
    }
    if (auto error = context.transport.failure(transport_peer)) {
      // A peer may arrive and then leave (its last call done) between our look at its flag and
      // this check: only a peer that is gone without having arrived is an error.
      if (word.load(std::memory_order_acquire) >= epoch) break;
      rethrow_with_context(context, peer, error);
    }
    // A peer stuck in another call may have sent us a message (or a probe) of this slot.
    if (auto error = context.transport.conflict(transport_peer, context.tag(0), context.fingerprint)) {
      rethrow_with_context(context, peer, error);
    }
    if (!probed && now - start > kProbeAfter && context.fingerprint != 0) {
      probed = true;
      context.probe(peer);
    }
    if (now - start > context.timeout) {
      throw TimeoutError(std::string("waited ") + seconds_text(context.timeout) + " for rank " + std::to_string(peer) +
                             " " + describe(which) +
                             " in shared memory; every rank of the "
                             "group must call the same collectives in the same order (is one of them stuck, or doing "
                             "something else?)",
                         error_context(context, peer));
    }
  }
}

// Every rank publishes the call it is in (number and fingerprint) with its input. A peer in
// another call is a mismatch, reported on both sides; when it is at another call number, it did
// something other than a shared-memory collective in this slot, and the message it sent us for
// it (read in now) names what.
void check_call(const CollectiveContext& context, SharedArena& arena, int buffer, int peer) {
  const SharedArena::Control& control = arena.control(peer);
  std::uint64_t theirs = control.fingerprint[buffer].load(std::memory_order_relaxed);
  std::uint64_t sequence = control.sequence[buffer].load(std::memory_order_relaxed);
  if (theirs == context.fingerprint && sequence == context.sequence) return;
  int transport_peer = context.transport_rank(peer);
  auto deadline = Clock::now() + std::chrono::seconds(2);
  if (sequence > context.sequence) {
    // The peer did this slot's call elsewhere; the message it sent us then says what.
    do {
      context.transport.progress(transport_peer);
      if (auto error = context.transport.conflict(transport_peer, context.tag(0), context.fingerprint)) {
        rethrow_with_context(context, peer, error);
      }
      // The transport may have compared that message with this call already, and stopped.
      if (auto error = context.transport.failure(transport_peer)) rethrow_with_context(context, peer, error);
    } while (Clock::now() < deadline);
  } else if (sequence < context.sequence) {
    // The peer is in a call this rank made elsewhere: it finds our message of that slot and
    // aborts, saying what both sides called; wait for its word.
    do {
      if (auto error = context.transport.failure(transport_peer)) rethrow_with_context(context, peer, error);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } while (Clock::now() < deadline);
  }
  throw MismatchError("collective mismatch: this rank called " + detail::describe_fingerprint(context.fingerprint) +
                          " as call " + std::to_string(context.sequence) + " of its group but rank " +
                          std::to_string(peer) + " called " + detail::describe_fingerprint(theirs) + " as call " +
                          std::to_string(sequence) +
                          "; every rank of a group must call the same collectives, in "
                          "the same order, with matching arguments",
                      error_context(context, peer));
}

// This rank's input of `epoch` is in its slot, for the call it names.
void publish_arrival(const CollectiveContext& context, SharedArena& arena, std::uint64_t epoch) {
  SharedArena::Control& mine = arena.control(context.rank);
  int buffer = static_cast<int>(epoch & 1);
  mine.fingerprint[buffer].store(context.fingerprint, std::memory_order_relaxed);
  mine.sequence[buffer].store(context.sequence, std::memory_order_relaxed);
  mine.arrived.store(epoch, std::memory_order_release);
}

// Waits for one peer's flag (its slot of the epoch filled and in this call, or its part of the
// result written).
void wait_for(const CollectiveContext& context, SharedArena& arena, int peer, Flag which, std::uint64_t epoch) {
  if (flag(arena.control(peer), which).load(std::memory_order_acquire) < epoch) {
    wait_for_peer(context, arena, peer, which, epoch);
  }
  if (which == Flag::Arrived) check_call(context, arena, static_cast<int>(epoch & 1), peer);
}

}  // namespace

void wait_all(const CollectiveContext& context, SharedArena& arena, Flag which, std::uint64_t epoch) {
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) wait_for(context, arena, peer, which, epoch);
  }
}

void publish_and_wait(const CollectiveContext& context, SharedArena& arena, Flag which, std::uint64_t epoch) {
  SharedArena::Control& mine = arena.control(context.rank);
  if (which == Flag::Reduced) {
    mine.reduced.store(epoch, std::memory_order_release);
    wait_all(context, arena, Flag::Reduced, epoch);
    return;
  }
  publish_arrival(context, arena, epoch);
  wait_all(context, arena, Flag::Arrived, epoch);
}

namespace {

// Claims the next epoch and publishes `bytes` of input in this rank's slot, then waits for
// everyone's. The epoch's buffer is free without a wait: it was last used two epochs back, and
// every rank finished that piece before it arrived at the previous epoch, which this rank
// waited for.
std::uint64_t arrive(const CollectiveContext& context, SharedArena& arena, const void* input, std::size_t bytes) {
  std::uint64_t epoch = arena.next_epoch();
  if (bytes > 0) std::memcpy(arena.slot(static_cast<int>(epoch & 1), context.rank), input, bytes);
  publish_and_wait(context, arena, Flag::Arrived, epoch);
  return epoch;
}

// target = slot 0 op slot 1 op ... op slot n-1 (rank order, so every rank that computes an
// element gets the same bytes), over `elements` from byte `offset` of each slot. `holds_first`:
// target already holds slot 0's bytes (rank 0's own input). The first two slots are combined
// in one pass, without copying slot 0 into the target first.
void reduce_slots(std::uint8_t* target, const SharedArena& arena, int buffer, std::size_t offset, std::size_t elements,
                  DType dtype, ReduceOp op, bool holds_first) {
  if (elements == 0) return;
  int n = arena.size();
  const std::uint8_t* first = holds_first ? target : arena.slot(buffer, 0) + offset;
  if (n == 1) {
    if (!holds_first) std::memcpy(target, first, elements * element_size(dtype));
  } else {
    combine(target, first, arena.slot(buffer, 1) + offset, elements, dtype, op);
  }
  for (int peer = 2; peer < n; ++peer) reduce(target, arena.slot(buffer, peer) + offset, elements, dtype, op);
  if (op == ReduceOp::Avg) divide(target, elements, dtype, static_cast<std::size_t>(n));
}

// One segment of the piece per rank: each reduces its own (in rank order, from every rank's slot)
// into the shared result, then copies every segment out. The waits are per peer, not barriers:
// a rank reduces slot p as soon as rank p arrived and copies segment q out as soon as rank q
// reduced it, so one late rank holds up only what needs its bytes (16 ranks meet twice a piece,
// and a barrier would make every rank wait for the slowest one both times). Nobody reads this
// rank's own segment of its slot: it is neither copied in nor read back from there.
void reduce_by_segment(const CollectiveContext& context, SharedArena& arena, std::uint8_t* piece, std::size_t elements,
                       DType dtype, ReduceOp op) {
  int n = context.size;
  std::size_t element = element_size(dtype);
  auto bounds = [&](int rank) {  // the segment rank `rank` owns, in bytes
    auto part = [&](int r) { return elements * static_cast<std::size_t>(r) / static_cast<std::size_t>(n) * element; };
    return std::pair{part(rank), part(rank + 1)};
  };
  auto [begin, end] = bounds(context.rank);
  std::uint64_t epoch = arena.next_epoch();
  int buffer = static_cast<int>(epoch & 1);
  std::uint8_t* slot = arena.slot(buffer, context.rank);
  std::memcpy(slot, piece, begin);
  std::memcpy(slot + end, piece + end, elements * element - end);
  publish_arrival(context, arena, epoch);

  // target = slot 0 op slot 1 op ... op slot n-1 over this rank's segment.
  std::uint8_t* target = arena.result(buffer) + begin;
  std::size_t count = (end - begin) / element;
  auto source = [&](int rank) -> const std::uint8_t* {
    if (rank == context.rank) return piece + begin;
    wait_for(context, arena, rank, Flag::Arrived, epoch);
    return arena.slot(buffer, rank) + begin;
  };
  const std::uint8_t* first = source(0);
  combine(target, first, source(1), count, dtype, op);
  for (int rank = 2; rank < n; ++rank) reduce(target, source(rank), count, dtype, op);
  if (op == ReduceOp::Avg) divide(target, count, dtype, static_cast<std::size_t>(n));
  arena.control(context.rank).reduced.store(epoch, std::memory_order_release);

  // Every segment out, starting with this rank's and then the next ranks' in turn, so that the
  // ranks do not all read from one owner at once.
  for (int step = 0; step < n; ++step) {
    int owner = (context.rank + step) % n;
    if (owner != context.rank) wait_for(context, arena, owner, Flag::Reduced, epoch);
    auto [from, to] = bounds(owner);
    std::memcpy(piece + from, arena.result(buffer) + from, to - from);
  }
}

}  // namespace

void shared_memory_all_reduce(const CollectiveContext& context, SharedArena& arena, void* data, std::size_t count,
                              DType dtype, ReduceOp op) {
  context.check_transport();  // a rank whose group stopped must not arrive: the others would go on
  int n = context.size;
  std::size_t element = element_size(dtype);
  std::size_t piece_count = arena.slot_bytes() / element;
  auto* bytes = static_cast<std::uint8_t*>(data);
  std::size_t first = 0;
  do {  // at least once: an empty call still meets the others (and compares fingerprints)
    std::size_t elements = std::min(piece_count, count - first);
    std::uint8_t* piece = bytes + first * element;
    if (elements * element <= kReduceLocallyBytes || n == 2) {
      // Every rank reduces the whole piece straight into its buffer.
      std::uint64_t epoch = arrive(context, arena, piece, elements * element);
      reduce_slots(piece, arena, static_cast<int>(epoch & 1), 0, elements, dtype, op, context.rank == 0);
    } else {
      reduce_by_segment(context, arena, piece, elements, dtype, op);
    }
    first += elements;
  } while (first < count);
  context.check_transport();
}

void shared_memory_barrier(const CollectiveContext& context, SharedArena& arena) {
  context.check_transport();
  arrive(context, arena, nullptr, 0);
  context.check_transport();
}

}  // namespace comm::algorithms
