// Which local address a rank listens on and advertises for data connections.
//
// COMM_SOCKET_IFNAME selects interfaces as NCCL_SOCKET_IFNAME does (libcomm/base/
// network_interfaces.hpp). Unset, the address the kernel routes towards the store's host is used (so
// peers reach us the way we reached the store), else the first non-loopback interface.
#pragma once

#include <string>
#include <vector>

#include "transport/socket.hpp"

namespace comm::transport {

struct LocalAddress {
  SocketAddress address;  // port 0
  std::string interface;  // its interface name, for the log
};

LocalAddress choose_local_address(const std::string& route_to_host);

}  // namespace comm::transport
