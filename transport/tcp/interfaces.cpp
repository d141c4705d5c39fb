#include "transport/tcp/interfaces.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/network_interfaces.hpp"

namespace comm::transport {
namespace {

struct Candidate {
  std::string name;
  SocketAddress address;
  bool loopback = false;
};

std::vector<Candidate> interfaces_up() {
  std::vector<Candidate> result;
  for (const auto& interface : network_interfaces()) {
    Candidate candidate{interface.name, {}, interface.loopback};
    candidate.address.storage = interface.address;
    candidate.address.length = interface.length;
    result.push_back(candidate);
  }
  return result;
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

LocalAddress choose_local_address(const std::string& route_to_host) {
  auto candidates = interfaces_up();
  if (auto filter = environment::get("COMM_SOCKET_IFNAME")) {
    for (const auto& candidate : candidates) {
      if (interface_matches(*filter, candidate.name)) return {candidate.address, candidate.name};
    }
    throw InvalidArgumentError("COMM_SOCKET_IFNAME='" + *filter +
                                   "' matches no interface that is up with an "
                                   "address; this host has: " +
                                   interface_names(network_interfaces()),
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
