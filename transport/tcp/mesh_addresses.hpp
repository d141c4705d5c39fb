// Every rank's address and host, in O(N) store operations: each rank has published its own
// (tcp/R, host/R), they are gathered into one table in two levels (the first rank of each run of
// ceil(sqrt N) ranks gathers theirs, rank 0 the runs: about 2 sqrt(N) reads one after another),
// and every other rank reads that. (Each rank reading every other's keys was N^2 operations on
// the one store.)
#pragma once

#include <string>
#include <vector>

#include "comm/store_interface.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace comm::transport {

struct AddressBook {
  std::vector<std::string> addresses, hosts;  // [rank]: "address nonce", host identity
};

// `own_address`: this rank's "address nonce", as published.
AddressBook gather_addresses(Store& store, const MeshOptions& options, const std::string& own_address);

}  // namespace comm::transport
