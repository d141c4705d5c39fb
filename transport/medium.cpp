#include "transport/medium.hpp"

#include <cstring>

#include "comm/error.hpp"

namespace comm::transport {

void throw_peer_lost(const std::string& peer_name, int peer, const char* what, int error) {
  std::string reason = error == 0 ? "closed the connection" : std::string("connection failed: ") + std::strerror(error);
  throw PeerClosedError(
      peer_name + " " + reason + " while " + what + "; that process has probably exited or crashed: look at its output",
      ErrorContext{.peer = peer});
}

}  // namespace comm::transport
