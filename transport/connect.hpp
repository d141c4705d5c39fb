// Opening a group's transport: the TCP mesh first (every pair gets a socket), then, for peers
// on the same host, shared-memory rings that carry the data while the socket only wakes the
// peer and reports its death.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/transport.hpp"

namespace comm::transport {

enum class MediumChoice { Automatic, Tcp, SharedMemory };

// "auto", "tcp" or "shm"; throws InvalidArgumentError naming where the text came from.
MediumChoice parse_medium_choice(const std::string& text, const std::string& source);

// How the set-up learns of the job's failure and tells the others of its own, while it waits
// on other ranks: `check` throws when the job has failed elsewhere (another rank's published
// error); `fail` publishes this rank's finding (a dead peer) and throws, before anything is
// cleaned up, so that no rank tripping over the clean-up is taken for the cause.
// `connected` runs once this rank holds a connection to every other: from then on the
// transport sees a rank die, and the store need not (init withdraws its last word there).
struct JobFailure {
  std::function<void()> check = [] {};
  std::function<void(const Error&)> fail = [](const Error& error) { throw error; };
  std::function<void()> connected = [] {};
};
std::shared_ptr<Transport> connect_transport(Store& store, const MeshOptions& options, MediumChoice choice,
                                             const JobFailure& job_failure = {});

// What makes two ranks "on the same host": the host name and the network namespace, so that
// namespaces standing in for hosts on one machine are told apart. COMM_HOST_ID overrides.
std::string host_identity();

}  // namespace comm::transport
