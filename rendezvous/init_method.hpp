// Parsing init_method URLs: env://, tcp://host:port and file:///path, each optionally with a
// query of rank=, world_size= (as torch.distributed accepts). tcp:// with an IP multicast
// address (224.0.0.0/4, ff00::/8) is multicast discovery (rendezvous/multicast_discovery.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace comm {

struct InitMethod {
  enum class Kind { Environment, Tcp, Multicast, File };
  Kind kind = Kind::Environment;
  std::string host;         // Tcp, Multicast: without brackets, e.g. "::1"
  std::uint16_t port = 0;   // Tcp, Multicast
  std::string path;         // File: absolute
  std::optional<int> rank;  // from ?rank=
  std::optional<int> world_size;
};

// Throws InvalidArgumentError saying what is wrong and what a valid URL looks like.
InitMethod parse_init_method(const std::string& url);

// Parses a TCP port (1..65535); `what` names its source in the error ("MASTER_PORT").
std::uint16_t parse_port(const std::string& text, const std::string& what);

}  // namespace comm
