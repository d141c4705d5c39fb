#include "rendezvous/multicast_interface.hpp"

#include <netinet/in.h>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/network_interfaces.hpp"

namespace comm {

ChosenInterface choose_interface(bool v4) {
  auto filter = environment::get("COMM_SOCKET_IFNAME");
  if (!filter) return {};
  auto interfaces = network_interfaces();
  for (const auto& interface : interfaces) {
    if (!interface_matches(*filter, interface.name) || !(interface.multicast || interface.loopback)) continue;
    if (v4 && interface.address.ss_family != AF_INET) continue;
    ChosenInterface chosen{interface.name, interface.index};
    if (v4) {
      const auto* address = reinterpret_cast<const sockaddr_in*>(&interface.address);
      chosen.address_v4 = asio::ip::address_v4(ntohl(address->sin_addr.s_addr));
    }
    return chosen;
  }
  throw InvalidArgumentError("COMM_SOCKET_IFNAME='" + *filter + "' matches no interface that is up, can multicast" +
                                 (v4 ? " and has an IPv4 address" : "") +
                                 "; this host has: " + interface_names(interfaces),
                             ErrorContext{.op = "init_process_group"});
}

}  // namespace comm
