#include "transport/connect.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "transport/job_failure.hpp"
#include "transport/message/mesh_transport.hpp"
#include "transport/shm/shared_arena.hpp"
#include "transport/shm/shm_pairs.hpp"
#include "transport/shm/shm_segment.hpp"
#include "transport/shm/shm_stream.hpp"
#include "transport/tcp/lazy_connector.hpp"
#include "transport/tcp/socket_stream.hpp"
#include "transport/tcp/striped_stream.hpp"
#include "transport/watched_store.hpp"

namespace comm::transport {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
  return text.empty() ? "none" : text;
}

// Whether a store host is this machine's loopback ("" : no network store, as with file://).
bool is_loopback(const std::string& host) {
  return host.empty() || host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
}

}  // namespace

MediumChoice parse_medium_choice(const std::string& text, const std::string& source) {
  if (text == "auto") return MediumChoice::Automatic;
  if (text == "tcp") return MediumChoice::Tcp;
  if (text == "shm") return MediumChoice::SharedMemory;
  throw InvalidArgumentError("transport '" + text + "' (" + source + ") is not one of auto, tcp, shm",
                             ErrorContext{.op = "init_process_group"});
}

std::string host_identity() {
  if (auto forced = environment::get("COMM_HOST_ID")) return *forced;
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  char namespace_link[128] = {};
  ssize_t length = ::readlink("/proc/self/ns/net", namespace_link, sizeof namespace_link - 1);
  return std::string(host) + "/" + (length > 0 ? std::string(namespace_link, static_cast<std::size_t>(length)) : "");
}

std::shared_ptr<Transport> connect_transport(Store& job_store, const MeshOptions& options, MediumChoice choice,
                                             const JobFailure& job_failure) {
  // Another rank's published cause wins (looked for while waiting for the others' addresses);
  // else this rank's finding is published, before its connections close.
  SettledJobFailure failure(job_failure);
  WatchedStore watched_job(job_store, [&] { failure.check(); });
  MeshOptions mesh_options = options;
  mesh_options.host = host_identity();
  std::string connect_mode = environment::get("COMM_CONNECT").value_or("eager");
  if (connect_mode != "eager" && connect_mode != "lazy") {
    throw InvalidArgumentError(
        "COMM_CONNECT='" + connect_mode + "' is not one of eager (every peer at init), lazy (each peer on first use)",
        ErrorContext{.rank = options.rank, .op = "init_process_group"});
  }
  mesh_options.connect_lazily = connect_mode == "lazy";
  mesh_options.shared_memory = choice != MediumChoice::Tcp;
  // What each step of the set-up took, at debug level (issue 31: start-up at many ranks).
  auto started = std::chrono::steady_clock::now();
  auto took_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  };
  Mesh mesh = connect_mesh(
      watched_job, mesh_options, [&](const Error& error) { failure.fail(error); }, [&] { failure.check(); });
  failure.connected();
  log::get(log::Subsystem::Transport).debug("connected to {} peers over tcp after {} ms", options.size - 1, took_ms());
  int rank = options.rank;
  // From here every rank holds a connection to every other: one that closes is a rank that
  // died, and the waits below say so at once.
  std::string phase = "the ranks were comparing their hosts";
  auto look_at_peers = [&] { check_peers_alive(mesh, rank, phase); };
  // Throws the job's failure: another rank's published cause, else a dead peer the mesh sees.
  WatchedStore store(job_store, [&] { failure.check(look_at_peers); });
  // Every rank's host: which peers shared memory can reach (unless TCP is asked for), and the
  // host map hierarchical algorithms split groups by.
  std::vector<bool> same_host(options.size, false);
  std::vector<int> hosts(options.size, 0);
  if (options.size > 1) {
    const std::string& mine = mesh_options.host;  // the mesh gathered every rank's
    std::vector<std::string> identities(options.size);
    for (int peer = 0; peer < options.size; ++peer) {
      identities[peer] = mesh.hosts[peer];
      hosts[peer] = static_cast<int>(std::find(identities.begin(), identities.begin() + peer, identities[peer]) -
                                     identities.begin());
      if (peer == rank || choice == MediumChoice::Tcp) continue;
      same_host[peer] = identities[peer] == mine;
      if (choice == MediumChoice::SharedMemory && !same_host[peer]) {
        throw InvalidArgumentError("COMM_TRANSPORT=shm (or InitOptions::transport) asks for shared memory, but " +
                                       mesh.peer_names[peer] + " is on another host; use auto or tcp",
                                   ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"});
      }
    }
  }
  std::vector<std::unique_ptr<ByteStream>> streams(options.size);
  std::vector<int> over_shm, over_tcp;
  // From the hosts themselves: with COMM_TRANSPORT=tcp no peer counts as sharing memory, but
  // a one-host job still spans no hosts.
  bool spans_hosts = std::any_of(hosts.begin(), hosts.end(), [](int host) { return host != 0; });
  if (rank == 0 && options.size > 1 && !options.secret_from_user &&
      (spans_hosts || !is_loopback(options.route_to_host))) {
    log::get(log::Subsystem::Transport)
        .warn(
            "this job {} and runs unauthenticated: any program that can reach the store can read it and join the "
            "job; give every rank the same secret in COMM_JOB_TOKEN (or COMM_JOB_TOKEN_FILE)",
            spans_hosts ? "spans hosts" : "reaches its store over the network (" + options.route_to_host + ")");
  }
  std::string job_id = options.size > 1 ? options.secret->job_id() : "single";
  phase = "the shared-memory pairs were being set up";
  // A segment found gone is a rank that failed: the rank that actually died is named if the
  // mesh shows one, else whatever cause a failing rank published before its segments went.
  auto budget_mb = environment::get_integer_in("COMM_SHM_BUDGET_MB", 1, 1 << 20,
                                               "MiB of shared memory per rank for the rings it reads");
  std::size_t budget = budget_mb ? static_cast<std::size_t>(*budget_mb) << 20
                                 : default_shm_budget(1 + std::count(same_host.begin(), same_host.end(), true),
                                                      free_shared_memory_bytes());
  SharedMemoryPairs pairs(
      store, rank, options.size, job_id, same_host, options.timeout,
      [&](const Error& error) { failure.fail(error, look_at_peers); }, budget);
  std::string striped;
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer == rank || !mesh.sockets[peer].valid()) continue;  // (lazily: connected on first use)
    set_nonblocking(mesh.sockets[peer].fd());
    if (same_host[peer] && pairs.has(peer)) {
      streams[peer] =
          std::make_unique<ShmStream>(pairs.take(peer), std::move(mesh.sockets[peer]), peer, mesh.peer_names[peer]);
      over_shm.push_back(peer);
      continue;
    }
    over_tcp.push_back(peer);
    auto& extras = mesh.extra_sockets[peer];
    if (extras.empty()) {
      streams[peer] = std::make_unique<SocketStream>(std::move(mesh.sockets[peer]), peer, mesh.peer_names[peer]);
      continue;
    }
    std::vector<SocketStream> connections;
    connections.emplace_back(std::move(mesh.sockets[peer]), peer, mesh.peer_names[peer]);
    for (auto& socket : extras) {
      set_nonblocking(socket.fd());
      connections.emplace_back(std::move(socket), peer, mesh.peer_names[peer]);
    }
    striped += fmt::format("{}{} x{}", striped.empty() ? "" : ", ", peer, connections.size());
    streams[peer] = std::make_unique<StripedSocketStream>(std::move(connections));
  }
  log::get(log::Subsystem::Transport).debug("hosts compared, shared memory set up after {} ms", took_ms());
  if (!pairs.shortage().empty()) {
    // Said once per host, by its lowest rank; the others say it where debugging is asked for.
    bool lowest_on_host = std::find(same_host.begin(), same_host.begin() + rank, true) == same_host.begin() + rank;
    log::get(log::Subsystem::Transport)
        .log(lowest_on_host ? spdlog::level::warn : spdlog::level::debug,
             "shared memory between the ranks of this host could not be set up, so they talk over TCP instead "
             "(slower): {}",
             pairs.shortage());
  }
  log::get(log::Subsystem::Transport)
      .info("transport ({}): peers over shared memory: {}; over tcp ({}): {}{}",
            choice == MediumChoice::Automatic ? "automatic" : "asked for", rank_list(over_shm), mesh.local_address,
            rank_list(over_tcp), striped.empty() ? "" : " (several connections: " + striped + ")");
  // Hosts numbered 0, 1, ... in the order of their lowest rank.
  std::vector<int> numbered(options.size, 0);
  for (int peer = 0, next = 0; peer < options.size; ++peer) {
    numbered[peer] = hosts[peer] == peer ? next++ : numbered[hosts[peer]];
  }
  std::unique_ptr<PeerConnector> connector;
  if (mesh_options.connect_lazily && options.size > 1) {
    std::vector<bool> connected(options.size, false);
    for (int peer = 0; peer < options.size; ++peer) connected[peer] = streams[peer] != nullptr;
    auto lazy = std::make_unique<LazyConnector>(mesh_options, std::move(mesh.listener), mesh.listener_nonce,
                                                std::move(mesh.addresses), std::move(connected));
    log::get(log::Subsystem::Transport)
        .debug("connections on first use: {} of {} peers connected at init", lazy->connections(), options.size - 1);
    connector = std::move(lazy);
  }
  return MeshTransport::create(rank, std::move(mesh.peer_names), std::move(streams), std::move(numbered),
                               std::move(connector), create_shared_arena);
}

}  // namespace comm::transport
