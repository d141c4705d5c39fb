#include "transport/tcp/interfaces.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"

namespace comm::transport {
namespace {

struct Candidate {
  std::string name;
  SocketAddress address;
  bool loopback = false;
};

std::vector<Candidate> interfaces_up() {
  std::vector<Candidate> result;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return result;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || !(entry->ifa_flags & IFF_UP)) continue;
    int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      const auto* address = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&address->sin6_addr)) continue;  // needs a scope id: not advertised
    }
    Candidate candidate;
    candidate.name = entry->ifa_name;
    candidate.loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0;
    candidate.address.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&candidate.address.storage, entry->ifa_addr, candidate.address.length);
    result.push_back(candidate);
  }
  ::freeifaddrs(list);
  // IPv4 first: every tool and firewall handles it.
  std::stable_sort(result.begin(), result.end(), [](const Candidate& a, const Candidate& b) {
    return a.address.storage.ss_family == AF_INET && b.address.storage.ss_family != AF_INET;
  });
  return result;
}

std::string interface_names(const std::vector<Candidate>& candidates) {
  std::string names;
  for (const auto& candidate : candidates) {
    if (names.find(candidate.name) != std::string::npos) continue;
    names += (names.empty() ? "" : ", ") + candidate.name;
  }
  return names;
}

// The source address the kernel would use to reach host (a UDP connect sends nothing).
bool route_source(const std::string& host, SocketAddress& source) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* entry = found; entry != nullptr && !ok; entry = entry->ai_next) {
    Socket probe(::socket(entry->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe.valid() || ::connect(probe.fd(), entry->ai_addr, entry->ai_addrlen) != 0) continue;
    source.length = sizeof source.storage;
    ok = ::getsockname(probe.fd(), reinterpret_cast<sockaddr*>(&source.storage), &source.length) == 0;
  }
  ::freeaddrinfo(found);
  if (ok) source.set_port(0);
  return ok;
}

bool same_host_address(const SocketAddress& a, const SocketAddress& b) {
  if (a.storage.ss_family != b.storage.ss_family) return false;
  if (a.storage.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b.storage)->sin_addr.s_addr;
  }
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(&b.storage)->sin6_addr, sizeof(in6_addr)) == 0;
}

}  // namespace

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

LocalAddress choose_local_address(const std::string& route_to_host) {
  auto candidates = interfaces_up();
  if (auto filter = environment::get("COMM_SOCKET_IFNAME")) {
    for (const auto& candidate : candidates) {
      if (interface_matches(*filter, candidate.name)) return {candidate.address, candidate.name};
    }
    throw InvalidArgumentError("COMM_SOCKET_IFNAME='" + *filter +
                                   "' matches no interface that is up with an "
                                   "address; this host has: " +
                                   interface_names(candidates),
                               ErrorContext{.op = "transport.tcp"});
  }
  SocketAddress routed;
  if (!route_to_host.empty() && route_source(route_to_host, routed)) {
    for (const auto& candidate : candidates) {
      if (same_host_address(candidate.address, routed)) return {candidate.address, candidate.name};
    }
    return {routed, "route to " + route_to_host};
  }
  for (const auto& candidate : candidates) {
    if (!candidate.loopback) return {candidate.address, candidate.name};
  }
  for (const auto& candidate : candidates) return {candidate.address, candidate.name};
  throw IoError("no network interface is up", ErrorContext{.op = "transport.tcp"});
}

}  // namespace comm::transport
