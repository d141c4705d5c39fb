// init_process_group: turns InitOptions, the URL and the launcher's environment into a rank,
// a world size and a store, then runs the join protocol (rendezvous/join.hpp).
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "algorithms/tuner.hpp"
#include "comm/process_group.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/completion.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/group.hpp"
#include "libcomm/src/group_growth.hpp"
#include "libcomm/src/make_world.hpp"
#include "rendezvous/init_method.hpp"
#include "rendezvous/join.hpp"
#include "rendezvous/launch_environment.hpp"
#include "rendezvous/launcher_store.hpp"
#include "rendezvous/multicast_discovery.hpp"
#include "transport/connect.hpp"
#include "transport/watched_store.hpp"

namespace comm {
namespace {

constexpr const char* kOp = "init_process_group";
const std::string kJoinFailureKey = join_failure_key(0);

struct Placement {
  int rank = -1;
  int world_size = -1;
};

// -1 means "not given" (any other negative number is a mistake, refused by place()).
int choose(int from_options, std::optional<int> from_url, std::optional<int> from_environment) {
  if (from_options != -1) return from_options;
  if (from_url && *from_url >= 0) return *from_url;
  return from_environment.value_or(-1);
}

// A rank may be left out where a store can hand ranks out in arrival order: file://, tcp://
// and a store the caller brings (env:// keeps torch's rule: RANK or a launcher's variable).
bool ranks_can_be_automatic(const InitOptions& options, const InitMethod& method) {
  return options.store != nullptr || method.kind != InitMethod::Kind::Environment;
}

Placement place(const InitOptions& options, const InitMethod& method, const LaunchEnvironment& launch) {
  Placement placement{choose(options.rank, method.rank, launch.rank),
                      choose(options.world_size, method.world_size, launch.world_size)};
  COMM_CHECK(placement.world_size != -1, InvalidArgumentError, ErrorContext{.op = kOp},
             "world size unknown: set InitOptions::world_size, ?world_size= in the URL or WORLD_SIZE, "
             "or start the program with commrun, torchrun, mpirun or srun");
  COMM_CHECK(placement.world_size >= 1, InvalidArgumentError, ErrorContext{.op = kOp},
             "world size must be at least 1, got " + std::to_string(placement.world_size));
  COMM_CHECK(placement.rank != -1 || placement.world_size == 1 || ranks_can_be_automatic(options, method),
             InvalidArgumentError, ErrorContext{.op = kOp},
             "rank unknown: set InitOptions::rank, ?rank= in the URL or RANK, start the program with commrun, "
             "torchrun, mpirun or srun, or use file:// or tcp:// to have ranks handed out in arrival order");
  if (placement.rank == -1 && placement.world_size == 1) placement.rank = 0;
  COMM_CHECK(placement.rank == -1 || (placement.rank >= 0 && placement.rank < placement.world_size),
             InvalidArgumentError, ErrorContext{.op = kOp},
             "rank " + std::to_string(placement.rank) + " is outside 0.." + std::to_string(placement.world_size - 1) +
                 " for world size " + std::to_string(placement.world_size) +
                 (launch.rank_source.empty() ? std::string() : " (rank from " + launch.rank_source + ")"));
  return placement;
}

// The host of the TcpStore under a store (through PrefixStores), or "" for other stores.
std::string route_host_of(const Store& store) {
  if (const auto* tcp = dynamic_cast<const TcpStore*>(&store)) return tcp->host();
  if (const auto* prefix = dynamic_cast<const PrefixStore*>(&store)) return route_host_of(*prefix->underlying());
  return "";
}

struct JobStore {
  std::shared_ptr<Store> store;
  bool hosts_server = false;
  std::string description;
  std::string route_to_host{};  // the TCP store's host: data connections use the interface towards it
  std::unique_ptr<MulticastDiscovery> discovery{};  // announcing until this process has joined
};

// tcp://MULTICAST:PORT: the processes find each other on the group; the one with the lowest id
// serves the store on its own address.
JobStore discover_store(const InitOptions& options, const InitMethod& method, const Placement& placement,
                        const std::string& group_name, std::chrono::milliseconds timeout) {
  auto started = std::chrono::steady_clock::now();
  auto secret = resolve_job_secret(options.job_secret);
  auto discovery = std::make_unique<MulticastDiscovery>(
      DiscoveryOptions{method.host, method.port, placement.world_size, group_name, secret, timeout});
  auto found = discovery->find_store();
  auto left = std::max(std::chrono::milliseconds(1000), timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                      std::chrono::steady_clock::now() - started));
  TcpStoreOptions store_options{.is_server = found.serve, .timeout = left, .job_secret = options.job_secret};
  auto store = std::make_shared<TcpStore>(found.host, found.port, store_options);
  if (found.serve) discovery->announce_store(store->port());
  std::string description = store->describe() + " (found on " + discovery->describe() + ")";
  return {store, found.serve, description, found.host, std::move(discovery)};
}

// commrun or comm-store already serves the store: no rank hosts one.
bool store_is_external() { return environment::get(kStoreIsExternalVariable).value_or("0") != "0"; }

// The store srun's or mpirun's job has without MASTER_ADDR and MASTER_PORT, under a prefix of
// the launcher's job id.
JobStore open_launcher_store(const InitOptions& options, const LauncherStore& launcher, const Placement& placement,
                             std::chrono::milliseconds timeout) {
  log::get(log::Subsystem::Rendezvous).info("no MASTER_ADDR or MASTER_PORT: the store from {}", launcher.reason);
  if (launcher.kind == LauncherStore::Kind::File) {
    auto store = std::make_shared<FileStore>(launcher.path, timeout);
    return {std::make_shared<PrefixStore>(launcher.key_prefix, store), false, store->describe()};
  }
  bool host_server = placement.rank == 0 && !store_is_external();
  auto store = std::make_shared<TcpStore>(
      launcher.host, launcher.port,
      TcpStoreOptions{.is_server = host_server, .timeout = timeout, .job_secret = options.job_secret});
  return {std::make_shared<PrefixStore>(launcher.key_prefix, store), host_server, store->describe(), launcher.host};
}

JobStore open_store(const InitOptions& options, const InitMethod& method, const LaunchEnvironment& launch,
                    const Placement& placement, const std::string& group_name, std::chrono::milliseconds timeout) {
  if (options.store) {
    return {options.store, options.store->serves_others(), options.store->describe(), route_host_of(*options.store)};
  }
  if (placement.world_size == 1) return {std::make_shared<HashStore>(timeout), false, "no store (world size 1)"};
  if (method.kind == InitMethod::Kind::File) {
    return {std::make_shared<FileStore>(method.path, timeout), false, "file://" + method.path};
  }
  if (method.kind == InitMethod::Kind::Multicast)
    return discover_store(options, method, placement, group_name, timeout);
  std::string host = method.host;
  std::uint16_t port = method.port;
  if (method.kind == InitMethod::Kind::Environment) {
    auto address = environment::get("MASTER_ADDR");
    auto port_text = environment::get("MASTER_PORT");
    if (!address && !port_text) {
      if (auto launcher = store_from_launcher(launch))
        return open_launcher_store(options, *launcher, placement, timeout);
    }
    COMM_CHECK(
        address && port_text, InvalidArgumentError, ErrorContext{.op = kOp},
        std::string("env:// needs MASTER_ADDR and MASTER_PORT (missing: ") + (address ? "" : "MASTER_ADDR ") +
            (port_text ? "" : "MASTER_PORT") +
            "); start the program with commrun (or srun, or mpirun on one host, which say where the store is), or set "
            "them to rank 0's address and a free port");
    host = *address;
    port = parse_port(*port_text, "MASTER_PORT");
  }
  // Rank 0 hosts the server unless a launcher (commrun) or comm-store already runs one.
  bool external = store_is_external();
  TcpStoreOptions store_options{.timeout = timeout, .job_secret = options.job_secret};
  if (placement.rank == -1 && !external) {
    // No rank yet: whoever binds the port first hosts the server, the others (and every process
    // on other hosts, where the address is not local) are its clients.
    try {
      store_options.is_server = true;
      auto store = std::make_shared<TcpStore>(host, port, store_options);
      return {store, true, store->describe(), host};
    } catch (const IoError& error) {
      if (error.op() != "TcpStoreServer") throw;
    }
    store_options.is_server = false;
  } else {
    store_options.is_server = placement.rank == 0 && !external;
  }
  auto store = std::make_shared<TcpStore>(host, port, store_options);
  return {store, store_options.is_server, store->describe(), host};
}

std::shared_ptr<transport::Transport> open_transport(const WorldPlace& place, Store& store) {
  auto from_environment = environment::get("COMM_TRANSPORT");
  auto choice = transport::parse_medium_choice(from_environment.value_or(place.transport),
                                               from_environment ? "COMM_TRANSPORT" : "InitOptions::transport");
  transport::MeshOptions mesh{
      .rank = place.rank, .size = place.size, .route_to_host = place.route_to_host, .timeout = place.timeout};
  if (place.size > 1 && place.job_secret) {
    mesh.secret = JobSecret(*place.job_secret);
    mesh.secret_from_user = true;
  } else if (place.size > 1) {
    auto agreed = agree_job_secret(store);
    mesh.secret = std::move(agreed.secret);
    mesh.secret_from_user = agreed.from_user;
  }
  transport::JobFailure job_failure{
      [&] { throw_if_join_failed_or_store_lost(store, kJoinFailureKey, place.rank, place.size); },
      [&](const Error& error) { fail_join(store, kJoinFailureKey, error, place.rank, place.size); },
      [&] { withdraw_word_of_death(store, kJoinFailureKey); }};
  return transport::connect_transport(store, mesh, choice, job_failure);
}

// What a world made through `job` takes from the options and the launcher (the rest is the group's).
WorldPlace place_through(const JobStore& job, const InitOptions& options, const LaunchEnvironment& launch,
                         std::chrono::milliseconds timeout) {
  WorldPlace place;
  place.local_rank = launch.local_rank.value_or(-1);
  place.local_size = launch.local_size.value_or(-1);
  place.timeout = timeout;
  place.hosts_server = job.hosts_server;
  place.store_description = job.description;
  place.route_to_host = job.route_to_host;
  place.transport = options.transport;
  place.job_secret = options.job_secret;
  return place;
}

// A growth newer than `tried`, once one is opened; nothing at the deadline.
std::optional<GrowthRecord> next_growth(Store& job_groups, std::uint64_t tried,
                                        std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (job_groups.check({kGrowthOpenKey})) {
      GrowthRecord record = read_growth(job_groups);
      if (record.generation > tried) return record;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// InitOptions::join: a newcomer takes the next place a running group's grow() opened, after the
// group's own ranks (ProcessGroup::grow, group_growth.cpp, writes "grow/open"). A newcomer whose
// growth failed (a member died while growing: the members shrink, and may grow again), or that
// found its places taken (an earlier growth's record), waits for the next growth until the
// timeout. A place given (NCCL's ncclCommGrow names each newcomer's rank) is tried once.
using WorldMaker = std::function<std::shared_ptr<ProcessGroup>(const WorldPlace&)>;
std::shared_ptr<ProcessGroup> join_running_group(const InitOptions& options, const InitMethod& method,
                                                 const LaunchEnvironment& launch, std::chrono::milliseconds timeout,
                                                 const WorldMaker& make_world) {
  Placement unknown;  // the rank and size come from the group
  JobStore job = open_store(options, method, launch, unknown, options.join, timeout);
  auto job_groups = std::make_shared<PrefixStore>(options.join, job.store);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::uint64_t tried = 0;
  std::exception_ptr last_failure;
  while (true) {
    std::optional<GrowthRecord> opened =
        tried == 0 ? read_growth(*job_groups) : next_growth(*job_groups, tried, deadline);
    if (!opened) std::rethrow_exception(last_failure);
    std::int64_t claimed = 0;
    if (options.rank >= 0) {
      COMM_CHECK(options.rank >= opened->size && options.rank < opened->size + opened->count &&
                     (options.world_size < 0 || options.world_size == opened->size + opened->count),
                 InvalidArgumentError, ErrorContext{.op = kOp},
                 "group '" + options.join + "' grows from " + std::to_string(opened->size) + " to " +
                     std::to_string(opened->size + opened->count) + " ranks: a newcomer's rank is in " +
                     std::to_string(opened->size) + ".." + std::to_string(opened->size + opened->count - 1) +
                     ", and the size that one, not rank " + std::to_string(options.rank) + " of " +
                     std::to_string(options.world_size));
      claimed = options.rank - opened->size + 1;
    } else {
      claimed = job_groups->add("grow/" + std::to_string(opened->generation) + "/claimed", 1);
    }
    tried = opened->generation;
    if (claimed > opened->count) {  // (a given place is in range: checked above)
      last_failure = std::make_exception_ptr(InvalidArgumentError(
          "group '" + options.join + "' opened " + std::to_string(opened->count) +
              " places for new ranks and all are taken; start as many new processes as grow() asks for",
          ErrorContext{.op = kOp}));
      continue;
    }
    WorldPlace place = place_through(job, options, launch, timeout);
    place.job_store = job_groups;
    place.store = std::make_shared<PrefixStore>(growth_prefix(opened->generation), job_groups);
    place.name = options.join + "/" + growth_prefix(opened->generation);
    place.job_name = options.join;
    place.rank = opened->size + static_cast<int>(claimed) - 1;
    place.size = opened->size + opened->count;
    log::set_rank(place.rank, place.size);
    log::get(log::Subsystem::Rendezvous)
        .info("joining group '{}' as its rank {} of {} (grown from {})", options.join, place.rank, place.size,
              opened->size);
    try {
      return make_world(place);
    } catch (const Error& error) {
      if (options.rank >= 0) throw;
      log::get(log::Subsystem::Rendezvous)
          .info("the growth of group '{}' failed ({}); waiting for the next", options.join, error.message());
      last_failure = std::current_exception();
    }
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::make_world(const WorldPlace& place,
                                                             std::unique_ptr<MulticastDiscovery>* discovery) {
  auto started = std::chrono::steady_clock::now();
  Store& group_store = *place.store;
  JoinRequest join{place.rank, place.size, place.timeout, place.hosts_server, place.automatic_rank};
  // A group grown from a running one (ProcessGroup::grow) routes like the job: towards the store.
  WorldPlace routed = place;
  if (routed.route_to_host.empty()) routed.route_to_host = route_host_of(*place.store);
  if (place.size > 1) {
    // From here until the transport can see deaths itself, the store says when this rank dies
    // (its connection closes): a rank killed while others have not started yet is named at
    // once by those waiting, not after the timeout.
    bool deaths_seen = leave_word_of_death(group_store, kJoinFailureKey, place.rank);
    // The join's waits look at what can fail meanwhile, where something can: a store that
    // keeps last words, or discovery. Others (file://, a torch store, whose timed-out waits
    // are not to be sliced) wait as they are.
    transport::WatchedStore watched(group_store, [&] {
      // Processes of another job under the same group name may still be heard while joining.
      if (discovery && *discovery) (*discovery)->throw_if_failed();
      if (place.also_watch) place.also_watch();
      throw_if_join_failed(group_store, kJoinFailureKey, place.rank, place.size);
    });
    try {
      bool watch = deaths_seen || (discovery && *discovery) || place.also_watch;
      join_group(watch ? static_cast<Store&>(watched) : group_store, join);
    } catch (const MismatchError& error) {
      // Published as the job's failure, so that every rank still making the group (one that
      // completed it with the others, say, beside a duplicate RANK) reports this cause.
      fail_join(group_store, kJoinFailureKey, error, place.rank, place.size);
    }
    if (discovery) discovery->reset();  // every process has found the store: no one needs announcements now
  }
  // From here a rank that fails publishes why, and the others report that cause rather than
  // the rank that stopped after it.
  std::shared_ptr<transport::Transport> transport;
  std::unique_ptr<Impl> group;
  try {
    transport = open_transport(routed, group_store);
    Identity identity{place.rank, place.size, place.local_rank, place.local_size, place.name, place.job_name};
    group = std::make_unique<Impl>(std::move(identity), place.store, transport, place.timeout);
    group->medium_choice_ = place.transport;
    group->job_secret_ = place.job_secret;
    group->job_store_ = place.job_store ? place.job_store : place.store;
    if (place.size > 1) {
      transport::WatchedStore watched(group_store, [&] {
        throw_if_join_failed_or_store_lost(group_store, kJoinFailureKey, place.rank, place.size);
        try {
          // A rank that is through may return from init and exit: that is not a death.
          check_members_alive(*transport, {}, place.size, place.rank, "the group was being completed",
                              [&](int member) { return group_store.check({"through/" + std::to_string(member)}); });
        } catch (const Error& error) {
          fail_join(group_store, kJoinFailureKey, error, place.rank, place.size);
        }
      });
      finish_join(watched, join);
      group->read_link();
    }
  } catch (const Error& error) {
    if (place.size == 1) throw;
    try {
      fail_join(group_store, kJoinFailureKey, error, place.rank, place.size);
    } catch (Error& first) {
      // Ranks already through init hear the cause from the transport, not only that this
      // rank left.
      if (transport) transport->abort(first.what(), &first);
      throw;
    }
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  log::get(log::Subsystem::Rendezvous)
      .info("joined group '{}' as rank {} of {} through {} in {} ms", place.name, place.rank, place.size,
            place.store_description, elapsed.count());
  return std::make_shared<ProcessGroup>(std::move(group));
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  Placement placement;
  try {
    // Tuning variables first: a bad one is refused before anything waits on a peer.
    detail::spin_budget();
    algorithms::read_environment();
    auto method = parse_init_method(options.init_method);
    auto launch = read_launch_environment();
    auto timeout = environment::timeout_or(options.timeout);
    // A replacement commrun started (--restart) joins the running job: COMM_JOIN names its group.
    WorldMaker make_world = [](const WorldPlace& place) { return ProcessGroup::Impl::make_world(place); };
    if (auto from_launcher = environment::get("COMM_JOIN"); options.join.empty() && from_launcher) {
      InitOptions joining = options;
      joining.join = *from_launcher;
      return join_running_group(joining, method, launch, timeout, make_world);
    }
    if (!options.join.empty()) return join_running_group(options, method, launch, timeout, make_world);
    placement = place(options, method, launch);
    log::set_rank(placement.rank, placement.world_size);

    std::string name = options.group_name.empty() ? "default_pg" : options.group_name;
    JobStore job = open_store(options, method, launch, placement, name, timeout);
    auto group_store = std::make_shared<PrefixStore>(name, job.store);
    bool automatic_rank = placement.rank == -1;
    if (automatic_rank) {
      placement.rank =
          claim_automatic_rank(*group_store, placement.world_size, "group '" + name + "' through " + job.description);
      log::set_rank(placement.rank, placement.world_size);
      log::get(log::Subsystem::Rendezvous)
          .info("rank {} of {} in group '{}', handed out in arrival order through {}", placement.rank,
                placement.world_size, name, job.description);
    }
    WorldPlace world = place_through(job, options, launch, timeout);
    world.store = group_store;
    world.name = world.job_name = name;
    world.rank = placement.rank;
    world.size = placement.world_size;
    world.automatic_rank = automatic_rank;
    return ProcessGroup::Impl::make_world(world, &job.discovery);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = placement.rank, .op = kOp});
    throw;
  }
}

}  // namespace comm
