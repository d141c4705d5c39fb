// Multicast discovery, for init_method tcp://MULTICAST_ADDRESS:PORT as torch.distributed
// documents it: the processes of a job find each other by announcing themselves over UDP on an
// IP multicast group (IPv4 224.0.0.0/4, IPv6 ff00::/8), and agree that the one with the lowest
// random id serves the job's store; ranks are then handed out through that store as with file://.
//
// An announcement carries the job's group name and world size and, when the job has a secret, a
// proof of it (HMAC-SHA256, libcomm/base/job_secret.hpp). Announcements of other jobs (another
// group name, no proof or a wrong one) are counted for the timeout's message, never taken as
// members. Every process keeps announcing until its group is made (the caller destroys the
// discovery then), so a process that starts late still hears everyone.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "libcomm/base/job_secret.hpp"

namespace comm {

// Whether host is a literal IPv4 or IPv6 multicast address.
bool is_multicast_address(const std::string& host);

struct DiscoveryOptions {
  std::string group;  // the multicast address, without brackets
  std::uint16_t port = 0;
  int world_size = 1;
  std::string group_name;
  std::optional<JobSecret> secret;
  std::chrono::milliseconds timeout{};
};

struct DiscoveredStore {
  bool serve = false;      // this process serves the store, on `host` (its own address as the others see it)
  std::string host;        // the store's host
  std::uint16_t port = 0;  // the store's port (0 for the process that serves it: any free port)
};

class MulticastDiscovery {
 public:
  // Joins the group on the interface COMM_SOCKET_IFNAME names (else the routing table's) and
  // starts announcing. Throws InvalidArgumentError for a bad COMM_SOCKET_IFNAME or
  // COMM_MULTICAST_TTL, IoError when the group cannot be joined.
  explicit MulticastDiscovery(DiscoveryOptions options);
  ~MulticastDiscovery();  // stops announcing
  MulticastDiscovery(const MulticastDiscovery&) = delete;
  MulticastDiscovery& operator=(const MulticastDiscovery&) = delete;

  // Blocks until every process of the job has been heard and, for a process that does not serve
  // the store, until the server announced its port. Throws TimeoutError saying how many were
  // heard and what to check, MismatchError when the job's processes disagree (world size, more
  // processes than the world size), IoError when announcing fails.
  DiscoveredStore find_store();
  // Throws what discovery found wrong after find_store returned (another job's processes under
  // the same group name), having told the others; returns when nothing is. The caller looks
  // while it joins the store, so that it fails with the cause instead of waiting out the timeout.
  void throw_if_failed();
  // The serving process tells the others its store's port.
  void announce_store(std::uint16_t port);

  // "multicast group [ff15::1]:23456 on eth0", for logs and messages.
  std::string describe() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace comm
