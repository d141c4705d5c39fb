// This rank's stop, as the message layer keeps it: the error every transfer fails with once the
// transport stopped (abort, a mismatch, a thread that failed), and the Goodbye it said, which a
// peer that connects afterwards (on first use) is told too. A service with its own state; what
// stopping does to the channels (goodbyes, flushes, every peer lost) is the layer's
// (PeerLoss, peer_loss.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

namespace comm::transport {

class Failures {
 public:
  struct Farewell {
    std::string reason;
    std::uint64_t code = 0;   // 1 + the ErrorCode of the cause; 0: none in particular
    std::uint64_t about = 0;  // 1 + the rank the cause names; 0: none
  };
  // Why the transport stopped (null: it runs).
  const std::exception_ptr& stopped() const { return stopped_; }
  // The Goodbye said as it stops: the first stop's stands.
  void say(Farewell farewell) {
    if (!stopped_) farewell_ = std::move(farewell);
  }
  const Farewell& farewell() const { return farewell_; }
  // Stops over `error`; the first stop stands.
  void stop(std::exception_ptr error) {
    if (!stopped_) stopped_ = std::move(error);
  }

 private:
  std::exception_ptr stopped_;
  Farewell farewell_;
};

}  // namespace comm::transport
