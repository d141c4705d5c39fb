// Which local address a rank listens on and advertises for data connections.
//
// COMM_SOCKET_IFNAME selects interfaces as NCCL_SOCKET_IFNAME does: a comma-separated list of
// name prefixes ("eth,ib"), "=" before the list for exact names ("=eth0"), "^" for exclusion
// ("^lo,docker"). Unset, the address the kernel routes towards the store's host is used (so
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

// True when the interface name passes a COMM_SOCKET_IFNAME-style filter.
bool interface_matches(const std::string& filter, const std::string& name);

}  // namespace comm::transport
