// Collective mismatches as the message layer sees them: a message or probe whose call
// fingerprint differs from that of the receive of the same slot fails that receive with an error
// naming both calls; one that contradicts a call this rank began (CallLedger keeps them) stops
// the whole rank over the mismatch (PeerLoss::stop_over), which every peer then gets as its own
// error. Found inside a peer's read, the stop waits until the read is over (handle_pending).
//
// Used under the message layer's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "transport/message/call_ledger.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/peers.hpp"

namespace comm::transport {

class ProgressEngine;
class PeerLoss;

class MismatchWatch {
 public:
  // `poll_due`: raised when a call begins, so that Transport::poll() compares what came before.
  MismatchWatch(Peers& peers, Matcher& matcher, ProgressEngine& engine, PeerLoss& loss, std::atomic<bool>& poll_due)
      : peers_(peers), matcher_(matcher), engine_(engine), loss_(loss), poll_due_(poll_due) {}

  // Notes that this rank sends or receives in the call of `tag`; the first time, compares what
  // arrived of that call before. Inline: every transfer passes here, and while nothing arrived
  // early (no unexpected message, no probe ever) there is nothing to compare.
  void note_call(std::uint64_t tag, std::uint64_t fingerprint) {
    if (!calls_.note(tag, fingerprint)) return;
    poll_due_.store(true, std::memory_order_relaxed);  // poll() compares what arrived before (a
                                                       // stopped rank's stays due anyway)
    if (matcher_.has_unexpected() || probes_seen_) compare_new_call(tag, fingerprint);
  }
  // A probe from `peer` (transport.hpp): kept in its channel until the next, and compared with
  // the receives of its call now.
  void note_probe(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
    peers_[peer].note_probe(tag, fingerprint);
    probes_seen_ = true;
    fail_conflicting(peer, tag, fingerprint);
  }
  // Whether a collective message or probe from `peer` belongs to a call this rank began with
  // another fingerprint; if so the mismatch is handled (at once, or after the peer's read) and
  // the message must be dropped.
  bool contradicts_my_call(int peer, std::uint64_t tag, std::uint64_t fingerprint) {
    std::uint64_t mine = calls_.contradiction(tag, fingerprint);
    if (mine == 0) [[likely]]
      return false;
    stop_over(peer, mine, fingerprint);
    return true;
  }

  // A message or probe of the same call as `receive`, from its source (or any), whose
  // fingerprint differs: where it came from and what it says.
  struct Disagreement {
    int source;
    std::uint64_t fingerprint;
  };
  // Inline: a send/recv (fingerprint 0) has no call to disagree with, and every receive asks.
  std::optional<Disagreement> disagreement(const PostedReceive& receive) const {
    if (receive.fingerprint == 0) return std::nullopt;
    return find_disagreement(receive);
  }
  // The MismatchError a receive from `peer` of `tag`'s call with `fingerprint` would fail with
  // now, or null (Transport::conflict).
  std::exception_ptr conflict(int peer, std::uint64_t tag, std::uint64_t fingerprint) const;
  // Fails a receive whose call differs from the one a message of its slot came from.
  void fail(const PostedReceive& receive, int source, std::uint64_t message_fingerprint) const {
    receive.completion->fail(error(receive.fingerprint, source, message_fingerprint));
  }
  // Fails the posted receives of the same call as a message that disagrees with them.
  void fail_conflicting(int source, std::uint64_t tag, std::uint64_t fingerprint);

  // A mismatch found inside a peer's read, to stop over once it is over.
  bool pending() const { return static_cast<bool>(pending_); }
  void handle_pending() {  // inline: every read ends here
    if (pending_) [[unlikely]]
      stop_over(std::exchange(pending_, nullptr));
  }

 private:
  std::exception_ptr error(std::uint64_t mine, int source, std::uint64_t theirs) const {
    return mismatch_error(peers_.rank(), mine, source, peers_.name(source), theirs);
  }
  std::optional<Disagreement> find_disagreement(const PostedReceive& receive) const;
  void compare_new_call(std::uint64_t tag, std::uint64_t fingerprint);
  void stop_over(int peer, std::uint64_t mine, std::uint64_t theirs);
  void stop_over(const std::exception_ptr& mismatch);

  Peers& peers_;
  Matcher& matcher_;
  ProgressEngine& engine_;
  PeerLoss& loss_;
  std::atomic<bool>& poll_due_;
  CallLedger calls_;
  std::exception_ptr pending_;  // found inside a peer's read: handled after it
  bool probes_seen_ = false;    // a probe ever arrived: a new call compares the channels' probes
};

}  // namespace comm::transport
