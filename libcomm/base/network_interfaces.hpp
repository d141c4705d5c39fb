// The host's network interfaces that are up, and COMM_SOCKET_IFNAME's filter over their names
// (as NCCL_SOCKET_IFNAME: a comma-separated list of name prefixes "eth,ib", "=" before the list
// for exact names "=eth0", "^" for exclusion "^lo,docker"). The TCP transport picks the address
// it listens on from them; multicast discovery the interface it announces on.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

namespace comm {

struct NetworkInterface {
  std::string name;
  unsigned index = 0;  // if_nametoindex
  sockaddr_storage address{};
  socklen_t length = 0;
  bool loopback = false;
  bool multicast = false;  // IFF_MULTICAST
};

// One entry per address of every interface that is up (IPv6 link-local addresses left out: they
// need a scope to be reached). IPv4 first: every tool and firewall handles it.
std::vector<NetworkInterface> network_interfaces();

// True when the interface name passes a COMM_SOCKET_IFNAME-style filter.
bool interface_matches(const std::string& filter, const std::string& name);

// "eth0, lo" for messages: the names, once each.
std::string interface_names(const std::vector<NetworkInterface>& interfaces);

}  // namespace comm
