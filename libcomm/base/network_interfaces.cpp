#include "libcomm/base/network_interfaces.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace comm {

std::vector<NetworkInterface> network_interfaces() {
  std::vector<NetworkInterface> result;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return result;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || !(entry->ifa_flags & IFF_UP)) continue;
    int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      const auto* address = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&address->sin6_addr)) continue;
    }
    NetworkInterface found;
    found.name = entry->ifa_name;
    found.index = ::if_nametoindex(entry->ifa_name);
    found.loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0;
    found.multicast = (entry->ifa_flags & IFF_MULTICAST) != 0;
    found.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&found.address, entry->ifa_addr, found.length);
    result.push_back(found);
  }
  ::freeifaddrs(list);
  std::stable_sort(result.begin(), result.end(), [](const NetworkInterface& a, const NetworkInterface& b) {
    return a.address.ss_family == AF_INET && b.address.ss_family != AF_INET;
  });
  return result;
}

bool interface_matches(const std::string& filter, const std::string& name) {
  std::string list = filter;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') {
    exclude = true;
    list.erase(0, 1);
  }
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list.erase(0, 1);
  }
  bool listed = false;
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(at, comma - at);
    at = comma + 1;
    if (item.empty()) continue;
    if (exact ? name == item : name.rfind(item, 0) == 0) listed = true;
  }
  return exclude ? !listed : listed;
}

std::string interface_names(const std::vector<NetworkInterface>& interfaces) {
  std::vector<std::string> seen;
  std::string names;
  for (const auto& interface : interfaces) {
    if (std::find(seen.begin(), seen.end(), interface.name) != seen.end()) continue;
    seen.push_back(interface.name);
    names += (names.empty() ? "" : ", ") + interface.name;
  }
  return names;
}

}  // namespace comm
