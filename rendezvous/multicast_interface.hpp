// Which network interface a multicast discovery announces on (rendezvous/multicast_discovery.hpp):
// COMM_SOCKET_IFNAME's first match, else whatever the routing table chooses.
#pragma once

#include <asio.hpp>
#include <string>

namespace comm {

struct ChosenInterface {
  std::string name;  // "" when the routing table chooses
  unsigned index = 0;
  asio::ip::address_v4 address_v4{};  // for IPv4, whose membership names an address
};

// COMM_SOCKET_IFNAME's first match that is up, can multicast and (for an IPv4 group, `v4`) has an
// IPv4 address; empty when the variable is unset. A filter that matches no such interface is an
// InvalidArgumentError listing the host's interfaces.
ChosenInterface choose_interface(bool v4);

}  // namespace comm
