// Peers lost and this rank stopping. A peer is lost when its stream fails or it says Goodbye:
// everything pending with it fails with the reason, nothing waits on it again, and the groups it
// belonged to are revoked (unless it left in order). This rank stops on abort, on a mismatch, or
// when its progress thread fails: it tells every peer why (Goodbye), gives that a moment to
// leave, and loses every peer with the error its own transfers fail with from then on.
//
// Used under the message layer's lock. Failures (failures.hpp) keeps the stop itself.
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "comm/error.hpp"
#include "transport/medium.hpp"
#include "transport/message/failures.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/peers.hpp"

namespace comm::transport {

class ProgressEngine;
class MeshGroups;

class PeerLoss {
 public:
  // `poll_due`: raised once stopped, so that Transport::poll() reports it.
  PeerLoss(Peers& peers, Matcher& matcher, ProgressEngine& engine, MeshGroups& groups, std::atomic<bool>& poll_due)
      : peers_(peers), matcher_(matcher), engine_(engine), groups_(groups), poll_due_(poll_due) {}

  // Why this rank stopped (null: it runs).
  const std::exception_ptr& stopped() const { return failures_.stopped(); }
  // Why nothing more can be exchanged with `peer`, or null (Transport::failure).
  std::exception_ptr failure(int peer) const;

  void lose_peer(int peer, std::exception_ptr error);
  // A write failed because the peer closed: it may have said why just before (a Goodbye naming
  // a mismatch, say), and that, not "broken pipe", is what this rank's operations fail with.
  // Inside another peer's read, after that read (lose_after_writes).
  void lose_after_write_error(int peer, std::exception_ptr error);
  // Inline: every read ends here, and an out-of-line call with its vector exchange cost 27
  // instructions per poll.
  void lose_after_writes() {
    if (!write_losses_.empty()) [[unlikely]]
      lose_deferred();
  }

  // Stops this rank (Transport::abort): over `cause` when given, or over an unrecovered
  // revocation's cause, else "aborted: reason".
  void abort(const std::string& reason, const Error* cause);
  // Stops over `cause` (a mismatch, say), which every peer then gets as its own error.
  void stop_over(const Error& cause);
  // A peer that connected after this rank stopped: told why (the Goodbye the others got), then
  // closed.
  void say_farewell(PeerConnector::Connected& made);

 private:
  // Fails everything with `error` and tells the peers. `code`: 1 + the ErrorCode of the cause
  // (0: none); `about`: 1 + the rank it names (0: none).
  void shut_down(std::exception_ptr error, const std::string& reason, std::uint64_t code, std::uint64_t about = 0);
  void say_goodbye(const std::string& reason, std::uint64_t code, std::uint64_t about);
  void lose_deferred();

  Peers& peers_;
  Matcher& matcher_;
  ProgressEngine& engine_;
  MeshGroups& groups_;
  std::atomic<bool>& poll_due_;
  Failures failures_;  // this rank's stop and its Goodbye
  // Peers a write failed to while another peer's read was on the stack: lost (after a last read
  // of what they sent) once it is over.
  std::vector<std::pair<int, std::exception_ptr>> write_losses_;
};

}  // namespace comm::transport
