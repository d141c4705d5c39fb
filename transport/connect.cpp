#include "transport/connect.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "transport/job_failure.hpp"
#include "transport/media.hpp"
#include "transport/message/mesh_transport.hpp"
#include "transport/shm/shared_arena.hpp"
#include "transport/tcp/lazy_connector.hpp"
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

std::string host_identity() {
  if (auto forced = environment::get("COMM_HOST_ID")) return *forced;
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  char namespace_link[128] = {};
  ssize_t length = ::readlink("/proc/self/ns/net", namespace_link, sizeof namespace_link - 1);
  return std::string(host) + "/" + (length > 0 ? std::string(namespace_link, static_cast<std::size_t>(length)) : "");
}

std::shared_ptr<Transport> connect_transport(Store& job_store, const MeshOptions& options, const MediumEntry* chosen,
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
  // Lazily connected, a pair on one host still connects at init when shared memory may reach it.
  mesh_options.shared_memory = chosen == nullptr || std::string_view(chosen->name) == "shm";
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
  // Every rank's host, numbered by its lowest rank: the host map hierarchical algorithms split
  // groups by.
  std::vector<int> hosts(options.size, 0);
  for (int peer = 0; peer < options.size && options.size > 1; ++peer) {
    hosts[peer] = static_cast<int>(std::find(mesh.hosts.begin(), mesh.hosts.begin() + peer, mesh.hosts[peer]) -
                                   mesh.hosts.begin());
  }
  bool spans_hosts = std::any_of(hosts.begin(), hosts.end(), [](int host) { return host != 0; });
  if (rank == 0 && options.size > 1 && !options.secret_from_user &&
      (spans_hosts || !is_loopback(options.route_to_host))) {
    log::get(log::Subsystem::Transport)
        .warn(
            "this job {} and runs unauthenticated: any program that can reach the store can read it and join the "
            "job; give every rank the same secret in COMM_JOB_TOKEN (or COMM_JOB_TOKEN_FILE)",
            spans_hosts ? "spans hosts" : "reaches its store over the network (" + options.route_to_host + ")");
  }
  // The media this job uses, opened alike on every rank (opening one may wait for the others):
  // every automatic one, each peer going over the first that reaches it; or the one asked for,
  // with TCP, the bootstrap's own medium, behind it for a pair it could reach but does not (shared
  // memory that ran short).
  const MediumEntry& tcp = *parse_medium_choice("tcp", "the set-up");
  std::vector<const MediumEntry*> used;
  if (chosen != nullptr) {
    used.push_back(chosen);
    if (chosen != &tcp) used.push_back(&tcp);
  } else {
    for (const auto& medium : media()) {
      if (medium.automatic) used.push_back(&medium);
    }
  }
  std::string names;
  for (const auto* medium : used) names += (names.empty() ? "" : ", ") + std::string(medium->name);
  phase = "the media (" + names + ") were being set up";
  MediumJob job{.store = store,
                .rank = rank,
                .size = options.size,
                .job_id = options.size > 1 ? options.secret->job_id() : "single",
                .hosts = mesh.hosts,
                .local_address = mesh.local_address,
                .timeout = options.timeout,
                .fail = [&](const Error& error) { failure.fail(error, look_at_peers); }};
  std::vector<std::unique_ptr<MediumSession>> sessions;
  for (const auto* medium : used) sessions.push_back(medium->open(job));
  if (chosen != nullptr) {
    for (int peer = 0; peer < options.size; ++peer) {
      std::string why = peer == rank ? "" : sessions[0]->cannot_reach(peer);
      if (!why.empty()) {
        throw InvalidArgumentError("COMM_TRANSPORT=" + std::string(chosen->name) +
                                       " (or InitOptions::transport) asks for " + sessions[0]->description() +
                                       ", but " + mesh.peer_names[peer] + " " + why + "; use auto or tcp",
                                   ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"});
      }
    }
  }
  std::vector<std::unique_ptr<ByteStream>> streams(options.size);
  std::vector<std::vector<int>> reached(sessions.size());
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer == rank) continue;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      if (!sessions[i]->reaches(peer)) continue;
      // Lazily, a pair without its connection yet is connected over TCP on first use.
      if (used[i]->needs_connection && !mesh.sockets[peer].valid()) break;
      streams[peer] = sessions[i]->open(peer, mesh.peer_names[peer], std::move(mesh.sockets[peer]),
                                        std::move(mesh.extra_sockets[peer]));
      reached[i].push_back(peer);
      break;
    }
  }
  log::get(log::Subsystem::Transport).debug("hosts compared, media set up after {} ms", took_ms());
  std::string over, remarks;
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    over += fmt::format("{}{}: {}", over.empty() ? "peers over " : "; over ", sessions[i]->description(),
                        rank_list(reached[i]));
    remarks += sessions[i]->remarks();
    if (sessions[i]->shortage().empty()) continue;
    // Said once per host, by its lowest rank; the others say it where debugging is asked for.
    bool lowest_on_host = hosts[rank] == rank;
    log::get(log::Subsystem::Transport)
        .log(lowest_on_host ? spdlog::level::warn : spdlog::level::debug,
             "{} between the ranks of this host could not be set up, so they talk over TCP instead (slower): {}",
             sessions[i]->description(), sessions[i]->shortage());
  }
  log::get(log::Subsystem::Transport)
      .info("transport ({}): {}{}", chosen == nullptr ? "automatic" : "asked for", over, remarks);
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
                                                std::move(mesh.addresses), std::move(connected), std::move(mesh.early));
    log::get(log::Subsystem::Transport)
        .debug("connections on first use: {} of {} peers connected at init", lazy->connections(), options.size - 1);
    connector = std::move(lazy);
  }
  return MeshTransport::create(rank, std::move(mesh.peer_names), std::move(streams), std::move(numbered),
                               std::move(connector), create_shared_arena);
}

}  // namespace comm::transport
