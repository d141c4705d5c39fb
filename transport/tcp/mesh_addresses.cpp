#include "transport/tcp/mesh_addresses.hpp"

#include <algorithm>
#include <cmath>

#include "comm/error.hpp"

namespace comm::transport {

AddressBook gather_addresses(Store& store, const MeshOptions& options, const std::string& own_address) {
  const std::string kTable = "mesh/addresses";
  // Two levels, so that no rank reads more than about 2 sqrt(N) entries one after the other: the
  // first rank of each run of `run` ranks gathers theirs, and rank 0 gathers the runs.
  int run = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(options.size))));
  auto entries_of = [&](int first, int end) {
    std::string part;
    for (int peer = first; peer < end; ++peer) {
      std::string address = peer == options.rank ? own_address : store.get_string("tcp/" + std::to_string(peer));
      std::string host = peer == options.rank ? options.host : store.get_string("host/" + std::to_string(peer));
      if (address.find('\n') != std::string::npos || host.find('\n') != std::string::npos) {
        throw IoError("rank " + std::to_string(peer) + " published an address or host with a line break",
                      ErrorContext{.peer = peer, .op = "transport.tcp.connect"});
      }
      part += address + "\n" + host + "\n";
    }
    return part;
  };
  std::string table;
  if (options.rank % run == 0) {
    std::string part = entries_of(options.rank, std::min(options.rank + run, options.size));
    if (options.rank != 0) store.set(kTable + "/" + std::to_string(options.rank), part);
    if (options.rank == 0) table = std::move(part);
  }
  if (options.rank == 0) {
    for (int first = run; first < options.size; first += run)
      table += store.get_string(kTable + "/" + std::to_string(first));
    store.set(kTable, table);
  } else {
    table = store.get_string(kTable);
  }
  AddressBook book;
  for (std::size_t start = 0; start < table.size();) {
    std::size_t end = table.find('\n', start);
    if (end == std::string::npos) break;
    (book.addresses.size() == book.hosts.size() ? book.addresses : book.hosts)
        .push_back(table.substr(start, end - start));
    start = end + 1;
  }
  if (book.addresses.size() != static_cast<std::size_t>(options.size) || book.hosts.size() != book.addresses.size()) {
    throw IoError("the store's address table (" + kTable + ") has " + std::to_string(book.hosts.size()) +
                      " entries for " + std::to_string(options.size) + " ranks: not what rank 0 writes there",
                  ErrorContext{.op = "transport.tcp.connect"});
  }
  return book;
}

}  // namespace comm::transport
