// commrun: starts the ranks of a job on this node, like torchrun or mpirun -n.
//
//   commrun -n 4 ./prog args...                              4 ranks on this host
//   commrun --nnodes 2 --node-rank 0 --master-addr HOST0 --master-port 29500 -n 4 ./prog
//
// Node 0's commrun hosts the job's store (on a free port unless one is given) for as long
// as the job runs; every rank learns where from MASTER_ADDR/MASTER_PORT and connects to it.
#include <getopt.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "rendezvous/init_method.hpp"
#include "rendezvous/launch_environment.hpp"
#include "rendezvous/programs/core_reservation.hpp"
#include "rendezvous/programs/launcher.hpp"

namespace {

constexpr const char* kUsage = R"(usage: commrun [options] PROGRAM [ARGS...]

Starts the ranks of a libcomm (or torch-style) job on this node. Each rank gets RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT; output
lines are prefixed with "[rank] ". If a rank fails, the others are stopped and commrun exits
with the failed rank's status.

options:
  -n, --nproc-per-node N   ranks on this node (default 1)
  --nnodes N               nodes in the job (default 1)
  --node-rank R            this node's index, 0..nnodes-1 (default 0)
  --master-addr ADDR       address of node 0 (default 127.0.0.1 on a single node)
  --master-port PORT       store port on node 0 (default: any free port on a single node,
                           29500 with several nodes)
  --grace-period SECONDS   time ranks get after SIGTERM before SIGKILL (default 3)
  --exit-wait SECONDS       node 0 keeps the store up this long for other nodes' ranks
                           still running after its own finished (default 300)
  --bind core|none         pin each rank to its own core. By default commrun pins only to
                           cores of its own affinity mask that no other commrun job on this
                           machine has claimed, and only when it can claim one per rank
                           (claims live in /dev/shm/commrun-cores.lock and end with the job);
                           otherwise the ranks are left to the scheduler, so two jobs, or two
                           network namespaces standing in for hosts, never share a core.
                           core: pin even when that means sharing cores; none: never pin
  --on-failure teardown|continue
                           teardown (default): when a rank fails, stop the others.
                           continue: report it and let the others go on (they may shrink
                           their groups without it, docs/recovery.md); commrun then exits
                           with the status of the first rank that exited non-zero, ranks
                           killed by a signal aside
  --restart N              replace a rank that dies or fails with a new process, N times at
                           most in all (implies --on-failure continue). Every rank gets
                           COMM_RESTARTS=N; a replacement also COMM_JOIN=default_pg (its
                           init_process_group joins the running job, when the survivors
                           call grow(); docs/recovery.md) and COMM_REPLACEMENT=1, 2, ...
  --trace DIR              every rank writes its flight recorder into DIR (COMM_TRACE_DIR:
                           on a hang verdict, an error, and at exit; before commrun stops
                           the ranks, it asks each for one with SIGUSR2); at the end commrun
                           runs comm-trace on DIR: one merged timeline (trace.json, for
                           ui.perfetto.dev), summary.txt and timeline.png (docs/debugging.md)
  --no-prefix              do not prefix output lines with the rank
  -h, --help               this text
)";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "commrun: %s\n(commrun --help shows the options)\n", message.c_str());
  std::exit(2);
}

int parse_count(const char* text, const char* option, int minimum) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < minimum || value > 1 << 20) {
    usage_error(std::string(option) + " needs a whole number >= " + std::to_string(minimum) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

double parse_seconds(const char* text, const char* option) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= 0)) usage_error(std::string(option) + " needs seconds >= 0");
  return value;
}

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
  std::optional<std::uint16_t> master_port;
  double grace_seconds = 3.0;
  bool continue_on_failure = false;
  int restarts = 0;
  double exit_wait_seconds = 300.0;
  bool prefix = true;
  std::string bind = "auto";
  std::string trace;  // --trace DIR: the ranks' flight recorder dumps, merged there at the end
  std::vector<std::string> command;
};

// The long options, with torch's spellings too (--nproc_per_node, ...); getopt_long takes
// --name=value and --name value, and stops at the program ("+": its own flags are its own).
enum OptionKey : int {
  kNnodes = 256,
  kNodeRank,
  kMasterAddr,
  kMasterPort,
  kGracePeriod,
  kExitWait,
  kBind,
  kOnFailure,
  kRestart,
  kNoPrefix,
  kTrace,
};
constexpr option kLongOptions[] = {
    {"help", no_argument, nullptr, 'h'},
    {"nproc-per-node", required_argument, nullptr, 'n'},
    {"nproc_per_node", required_argument, nullptr, 'n'},
    {"nnodes", required_argument, nullptr, kNnodes},
    {"node-rank", required_argument, nullptr, kNodeRank},
    {"node_rank", required_argument, nullptr, kNodeRank},
    {"master-addr", required_argument, nullptr, kMasterAddr},
    {"master_addr", required_argument, nullptr, kMasterAddr},
    {"master-port", required_argument, nullptr, kMasterPort},
    {"master_port", required_argument, nullptr, kMasterPort},
    {"grace-period", required_argument, nullptr, kGracePeriod},
    {"grace_period", required_argument, nullptr, kGracePeriod},
    {"exit-wait", required_argument, nullptr, kExitWait},
    {"exit_wait", required_argument, nullptr, kExitWait},
    {"bind", required_argument, nullptr, kBind},
    {"on-failure", required_argument, nullptr, kOnFailure},
    {"on_failure", required_argument, nullptr, kOnFailure},
    {"restart", required_argument, nullptr, kRestart},
    {"no-prefix", no_argument, nullptr, kNoPrefix},
    {"no_prefix", no_argument, nullptr, kNoPrefix},
    {"trace", required_argument, nullptr, kTrace},
    {nullptr, 0, nullptr, 0},
};

Options parse(int argc, char** argv) {
  Options options;
  opterr = 0;  // the messages are commrun's own
  int i = argc;
  for (;;) {
    int previous = optind;
    int key = ::getopt_long(argc, argv, "+:hn:", kLongOptions, nullptr);
    if (key == -1) {
      i = optind;
      break;
    }
    // The option as the user wrote it, for messages ("--master-port", not the table's name).
    std::string written = argv[previous];
    written = written.substr(0, written.find('='));
    switch (key) {
      case 'h': std::fputs(kUsage, stdout); std::exit(0);
      case 'n':
        // mpirun's -np: getopt reads it as -n with the value "p"; the count follows.
        if (std::strcmp(argv[previous], "-np") == 0) {
          if (optind >= argc) usage_error("-np needs a value");
          optarg = argv[optind++];
        }
        options.nproc_per_node = parse_count(optarg, "-n", 1);
        break;
      case kNnodes: options.nnodes = parse_count(optarg, "--nnodes", 1); break;
      case kNodeRank: options.node_rank = parse_count(optarg, "--node-rank", 0); break;
      case kMasterAddr: options.master_addr = optarg; break;
      case kMasterPort:
        try {
          options.master_port = comm::parse_port(optarg, "--master-port");
        } catch (const comm::Error& error) {
          usage_error(error.message());
        }
        break;
      case kGracePeriod: options.grace_seconds = parse_seconds(optarg, "--grace-period"); break;
      case kExitWait: options.exit_wait_seconds = parse_seconds(optarg, "--exit-wait"); break;
      case kBind:
        options.bind = optarg;
        if (options.bind != "core" && options.bind != "none") usage_error("--bind takes core or none");
        break;
      case kOnFailure: {
        std::string policy = optarg;
        if (policy != "teardown" && policy != "continue") usage_error("--on-failure takes teardown or continue");
        options.continue_on_failure = policy == "continue";
        break;
      }
      case kRestart: options.restarts = parse_count(optarg, "--restart", 0); break;
      case kNoPrefix: options.prefix = false; break;
      case kTrace:
        options.trace = optarg;
        if (options.trace.empty()) usage_error("--trace needs a folder");
        break;
      case ':': usage_error(written + " needs a value");
      default: usage_error("unknown option '" + std::string(argv[previous]) + "'");
    }
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  if (options.command.empty()) usage_error("no program to run");
  if (options.node_rank >= options.nnodes) {
    usage_error("--node-rank " + std::to_string(options.node_rank) + " must be below --nnodes " +
                std::to_string(options.nnodes));
  }
  if (options.nnodes > 1 && options.node_rank > 0 && options.master_addr.empty()) {
    usage_error("with several nodes, --master-addr must name node 0");
  }
  return options;
}

// With several nodes, node 0's store must outlive every rank of every node, not only its own:
// each commrun reports when its ranks are done, and node 0 waits for all before it exits.
void leave_job(const Options& options, const std::string& master_addr, std::uint16_t master_port,
               const std::string& secret, bool succeeded) {
  try {
    comm::TcpStore store(master_addr, master_port,
                         comm::TcpStoreOptions{.timeout = std::chrono::seconds(30), .job_secret = secret});
    if (store.add("commrun/nodes_done", 1) == options.nnodes) store.set("commrun/all_nodes_done", "1");
    if (options.node_rank == 0 && succeeded) {
      store.wait({"commrun/all_nodes_done"},
                 std::chrono::milliseconds(static_cast<long long>(options.exit_wait_seconds * 1000)));
    }
  } catch (const comm::Error& error) {
    std::fprintf(stderr, "commrun: while waiting for the other nodes to finish: %s\n", error.what());
  }
}

// How long ranks get to write their flight recorder (SIGUSR2) before commrun stops them.
constexpr auto kDumpWait = std::chrono::milliseconds(2000);

// --trace's folder, made if missing, as an absolute path (the ranks may change directory).
std::string trace_folder(const std::string& given) {
  std::filesystem::path folder = std::filesystem::absolute(given);
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error || !std::filesystem::is_directory(folder)) {
    throw std::runtime_error("--trace " + given + ": cannot make the folder (" +
                             (error ? error.message() : std::string("not a folder")) + ")");
  }
  return folder.string();
}

// comm-trace beside this commrun (the build tree, an install's bin), else on PATH; run by the
// Python of an active virtual environment (where matplotlib draws the picture), else python3.
void merge_trace(const std::string& folder) {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  std::string script = "comm-trace";
  if (!error && std::filesystem::exists(self.parent_path() / "comm-trace")) script = (self.parent_path() / "comm-trace").string();
  std::string python = "python3";
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && std::filesystem::exists(std::string(venv) + "/bin/python"))
    python = std::string(venv) + "/bin/python";
  pid_t child = ::fork();
  if (child == 0) {
    if (script == "comm-trace") {
      ::execlp("comm-trace", "comm-trace", folder.c_str(), static_cast<char*>(nullptr));
    } else {
      ::execlp(python.c_str(), python.c_str(), script.c_str(), folder.c_str(), static_cast<char*>(nullptr));
    }
    std::fprintf(stderr, "commrun: cannot run comm-trace (%s): %s\n", script.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "commrun: comm-trace did not merge %s; run it by hand: comm-trace %s\n", folder.c_str(),
                 folder.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  if (!options.trace.empty()) {
    try {
      options.trace = trace_folder(options.trace);
    } catch (const std::exception& error) {
      usage_error(error.what());
    }
  }
  // Before any thread exists (the store server starts one), so that all inherit the mask.
  comm::launcher::block_forwarded_signals();

  bool single_node = options.nnodes == 1;
  // The job's secret: the user's (COMM_JOB_TOKEN or COMM_JOB_TOKEN_FILE) when given, else on one
  // node a fresh one, handed to the ranks in their environment. Every node's commrun must hold
  // the same secret, which only the user can arrange.
  std::optional<comm::JobSecret> secret;
  bool made_here = false;
  try {
    secret = comm::JobSecret::from_environment();
    if (!secret && single_node) {
      secret = comm::JobSecret::generate();
      made_here = true;
    }
  } catch (const comm::Error& error) {
    std::fprintf(stderr, "commrun: %s\n", error.what());
    return 2;
  }
  if (!secret && options.node_rank == 0) {
    std::fprintf(stderr,
                 "commrun: warning: no COMM_JOB_TOKEN: this %d-node job runs unauthenticated (any program that can "
                 "reach the store can read it and join the job); give every node the same secret, for example "
                 "COMM_JOB_TOKEN=$(openssl rand -hex 32)\n",
                 options.nnodes);
  }
  std::string secret_text = secret ? secret->text() : std::string();
  std::string master_addr = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
  std::uint16_t master_port = options.master_port.value_or(single_node ? 0 : 29500);
  std::unique_ptr<comm::TcpStoreServer> store;
  if (options.node_rank == 0) {
    try {
      // Binding port 0 lets the kernel choose a free port: no guessing, no race.
      // On the address ranks are given: loopback for one host; --master-addr across hosts.
      std::string listen = options.master_addr.empty() ? (single_node ? "127.0.0.1" : "") : options.master_addr;
      store = std::make_unique<comm::TcpStoreServer>(master_port, listen, secret_text);
      master_port = store->port();
    } catch (const comm::Error& error) {
      std::fprintf(stderr, "commrun: %s\n", error.what());
      return 1;
    }
  }

  int world_size = options.nnodes * options.nproc_per_node;
  comm::launcher::LaunchPlan plan;
  plan.command = options.command;
  plan.prefix_output = options.prefix;
  plan.grace_period = std::chrono::milliseconds(static_cast<long long>(options.grace_seconds * 1000));
  plan.continue_on_failure = options.continue_on_failure;
  plan.restarts = options.restarts;
  // Spinning ranks that share a core hand it back and forth (a round trip of microseconds
  // instead of a fraction of one), so each rank gets a core of its own where it can: one of
  // this process's usable cores that no other commrun job holds (a second job on the machine,
  // or a namespace standing in for another host, would otherwise pin to the same first cores).
  std::vector<int> usable;
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) usable.push_back(cpu);
    }
  }
  comm::launcher::CoreReservation reservation(usable, options.bind == "none" ? 0 : options.nproc_per_node);
  std::vector<int> cores = reservation.cores();
  if (reservation.lock_file_refused() && options.bind != "core")
    std::fprintf(stderr, "commrun: not pinning ranks: %s\n", reservation.why().c_str());
  if (cores.empty() && options.bind == "core" && !usable.empty()) {
    std::fprintf(stderr, "commrun: --bind core: %s; pinning to shared cores\n", reservation.why().c_str());
    cores = usable;
  }
  for (int local = 0; local < options.nproc_per_node; ++local) {
    int rank = options.node_rank * options.nproc_per_node + local;
    plan.ranks.push_back({rank,
                          {{"RANK", std::to_string(rank)},
                           {"WORLD_SIZE", std::to_string(world_size)},
                           {"LOCAL_RANK", std::to_string(local)},
                           {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
                           {"GROUP_RANK", std::to_string(options.node_rank)},
                           {"MASTER_ADDR", master_addr},
                           {"MASTER_PORT", std::to_string(master_port)},
                           {comm::kStoreIsExternalVariable, "1"}},
                          cores.empty() ? -1 : cores[static_cast<std::size_t>(local) % cores.size()]});
  }
  if (made_here) {
    for (auto& rank : plan.ranks) rank.environment["COMM_JOB_TOKEN"] = secret_text;
  }
  if (options.restarts > 0) {  // the ranks know replacements will come (and grow to let them in)
    for (auto& rank : plan.ranks) rank.environment["COMM_RESTARTS"] = std::to_string(options.restarts);
  }
  if (!options.trace.empty()) {
    for (auto& rank : plan.ranks) rank.environment["COMM_TRACE_DIR"] = options.trace;
    plan.dump_before_stop = kDumpWait;
  }
  int status = 1;
  try {
    status = comm::launcher::run(plan);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "commrun: %s\n", error.what());
  }
  if (options.nnodes > 1) leave_job(options, master_addr, master_port, secret_text, status == 0);
  if (!options.trace.empty()) merge_trace(options.trace);
  return status;
}
