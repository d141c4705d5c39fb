// commrun: environment, output prefixes, failure propagation, signals, several nodes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "rendezvous/programs/core_reservation.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::ChildProcess;

namespace {

using Clock = std::chrono::steady_clock;

std::string commrun() { return comm::testing::program_path("COMMRUN"); }
std::string helper() { return comm::testing::program_path("COMM_TEST_HELPER"); }

// Pids the helper's ranks wrote to the directory; waits until `count` are there.
std::vector<pid_t> rank_pids(const std::filesystem::path& directory, int count) {
  for (auto deadline = Clock::now() + 20s; Clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    std::vector<pid_t> pids;
    for (int rank = 0; rank < count; ++rank) {
      std::ifstream in(directory / std::to_string(rank));
      pid_t pid = 0;
      if (in >> pid) pids.push_back(pid);
    }
    if (static_cast<int>(pids.size()) == count) return pids;
  }
  FAIL("the ranks did not all start");
  return {};
}

bool all_gone_within(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  for (auto deadline = Clock::now() + limit; Clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    bool any = false;
    for (pid_t pid : pids) any = any || comm::testing::process_alive(pid);
    if (!any) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("commrun gives each rank its variables and prefixes every line", "[launcher]") {
  ChildProcess run({commrun(), "-n", "3", "--bind", "none", helper(), "env"});
  REQUIRE(run.wait_for(30s) == 0);
  auto output = run.output();
  INFO(output);
  for (int rank = 0; rank < 3; ++rank) {
    std::string r = std::to_string(rank);
    CHECK_THAT(output, ContainsSubstring("[" + r + "] " + r + " 3 " + r + " 3 127.0.0.1 cpus="));
    CHECK_THAT(output, ContainsSubstring("[" + r + "] partial line without newline"));
  }
}

// Issue 15, finding 6: ranks inherited commrun's listening store socket (and its pipes).
TEST_CASE("ranks inherit no descriptor of commrun's but stdio", "[launcher]") {
  ChildProcess run({commrun(), "-n", "3", helper(), "inherited-fds"});
  REQUIRE(run.wait_for(30s) == 0);
  auto output = run.output();
  INFO(output);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK_THAT(output, ContainsSubstring("[" + std::to_string(rank) + "] inherited 0"));
  }
}

TEST_CASE("commrun pins ranks to their own cores when there are enough", "[launcher]") {
  ChildProcess bound({commrun(), "-n", "1", "--bind", "core", helper(), "env"});
  REQUIRE(bound.wait_for(30s) == 0);
  CHECK_THAT(bound.output(), ContainsSubstring("cpus=1\n"));
  ChildProcess free({commrun(), "-n", "1", "--bind", "none", helper(), "env"});
  REQUIRE(free.wait_for(30s) == 0);
  INFO(free.output());
  CHECK_THAT(free.output(), ContainsSubstring("cpus=" + std::to_string(std::thread::hardware_concurrency())));
}

// Issue 18, deliverable 4: two commrun jobs on one machine (or two network namespaces standing
// in for hosts) both pinned their first rank to the first core.
TEST_CASE("commrun jobs claim cores of their own, all or none, until they end", "[launcher]") {
  std::string path = "/tmp/comm-core-claims-" + std::to_string(::getpid());
  {
    comm::launcher::CoreReservation first({0, 1, 2}, 2, path);
    CHECK(first.cores() == std::vector<int>{0, 1});
    comm::launcher::CoreReservation too_many({0, 1, 2}, 2, path);
    CHECK(too_many.cores().empty());
    CHECK_THAT(too_many.why(), ContainsSubstring("only 1 of the 3 usable cores are free"));
    comm::launcher::CoreReservation rest({0, 1, 2}, 1, path);
    CHECK(rest.cores() == std::vector<int>{2});
  }
  comm::launcher::CoreReservation again({0, 1, 2}, 3, path);  // the claims ended with their holders
  CHECK(again.cores() == std::vector<int>{0, 1, 2});
  comm::launcher::CoreReservation none({0}, 2, path);
  CHECK(none.cores().empty());
  CHECK_THAT(none.why(), ContainsSubstring("2 ranks but 1 usable cores"));
  std::filesystem::remove(path);
}

// Issue 27: the lock file lives in /dev/shm, where every user may plant a symlink or a file.
TEST_CASE("the core lock file cannot be redirected or planted by another user", "[launcher][security]") {
  comm::testing::TemporaryDirectory directory;
  auto path = directory.path() / "cores.lock";
  auto target = directory.path() / "ld.so.preload";
  SECTION("a symbolic link is not followed, and nothing is created where it points") {
    std::filesystem::create_symlink(target, path);
    comm::launcher::CoreReservation reservation({0, 1}, 1, path.string());
    CHECK(reservation.cores().empty());
    CHECK(reservation.lock_file_refused());
    CHECK_THAT(reservation.why(), ContainsSubstring("symbolic link"));
    CHECK_FALSE(std::filesystem::exists(target));
  }
  SECTION("a hard link to another file is refused") {
    { std::ofstream(target.string()); }
    std::filesystem::permissions(target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::create_hard_link(target, path);
    comm::launcher::CoreReservation reservation({0, 1}, 1, path.string());
    CHECK(reservation.lock_file_refused());
    CHECK_THAT(reservation.why(), ContainsSubstring("hard links"));
  }
  SECTION("a file of another user is refused") {
    if (::geteuid() != 0) SKIP("needs root to give a file away");
    { std::ofstream(path.string()); }
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read | std::filesystem::perms::group_write |
                                           std::filesystem::perms::others_read | std::filesystem::perms::others_write);
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    comm::launcher::CoreReservation reservation({0, 1}, 1, path.string());
    CHECK(reservation.lock_file_refused());
    CHECK_THAT(reservation.why(), ContainsSubstring("belongs to uid 65534"));
  }
  SECTION("a file this call makes is the lock file every user may lock, whatever the umask") {
    mode_t previous = ::umask(077);
    comm::launcher::CoreReservation reservation({0, 1}, 1, path.string());
    ::umask(previous);
    CHECK(reservation.cores() == std::vector<int>{0});
    struct stat status {};
    REQUIRE(::stat(path.c_str(), &status) == 0);
    CHECK((status.st_mode & 07777) == 0666);
  }
}

TEST_CASE("two commrun jobs at once never pin ranks to one core", "[launcher]") {
  // Each rank says which cores it may run on, and stays a moment so that the jobs overlap.
  auto job = [&] {
    return std::make_unique<ChildProcess>(std::vector<std::string>{
        commrun(), "-n", "1", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; sleep 1"});
  };
  auto first = job();
  std::this_thread::sleep_for(200ms);
  auto second = job();
  REQUIRE(first->wait_for(30s) == 0);
  REQUIRE(second->wait_for(30s) == 0);
  auto cores_of = [](const std::string& output) {
    auto at = output.find("Cpus_allowed_list:");
    return at == std::string::npos ? std::string() : output.substr(at + 18, output.find('\n', at) - at - 18);
  };
  std::string a = cores_of(first->output()), b = cores_of(second->output());
  INFO(first->output() << second->output());
  // A pinned rank may run on one core only; two pinned ranks never on the same one.
  bool a_pinned = a.find_first_of(",-") == std::string::npos, b_pinned = b.find_first_of(",-") == std::string::npos;
  // (Whether either is pinned depends on what other jobs hold at the moment: tests run in parallel.)
  CHECK(!(a_pinned && b_pinned && a == b));
}

TEST_CASE("a failing rank makes commrun exit with its status and stop the others", "[launcher]") {
  comm::testing::TemporaryDirectory pids;
  auto start = Clock::now();
  ChildProcess run({commrun(), "-n", "4", helper(), "exit", "3", "2", "300", pids.path().string()});
  auto ranks = rank_pids(pids.path(), 4);
  auto status = run.wait_for(20s);
  REQUIRE(status.has_value());
  CHECK(*status == 3);
  CHECK(all_gone_within(ranks, 5s));
  CHECK(Clock::now() - start < 15s);
  CHECK_THAT(run.output(), ContainsSubstring("rank 2 exited with status 3"));
}

// Issue 15, finding 7: when the killed rank and the survivors that failed because of it were
// reaped in one pass, commrun named the lowest-numbered (a survivor). Stopping commrun while
// they die makes that pass certain.
TEST_CASE("commrun names the rank that was killed, not a survivor that failed after it", "[launcher]") {
  comm::testing::TemporaryDirectory pids;
  ChildProcess run({commrun(), "-n", "4", helper(), "follow", "2", pids.path().string()});
  auto ranks = rank_pids(pids.path(), 4);
  run.signal(SIGSTOP);
  ::kill(ranks[2], SIGKILL);
  // The survivors exit 1 once rank 2 is a zombie (commrun, stopped, cannot reap it yet).
  std::this_thread::sleep_for(300ms);
  run.signal(SIGCONT);
  auto status = run.wait_for(20s);
  REQUIRE(status.has_value());
  INFO(run.output());
  CHECK(*status == 128 + SIGKILL);
  CHECK_THAT(run.output(), ContainsSubstring("rank 2 was killed by signal 9"));
}

// Issue 27, item 6: a survivor that saw the death over shared memory could exit, and be reaped,
// before the killed rank's own teardown ended; commrun named it (10 of 20 runs here). Now a rank
// that exits with a status waits a moment to be named, in case a killed rank is reaped meanwhile.
TEST_CASE("commrun names a rank killed in the middle of collectives, every time", "[launcher]") {
  for (int run_number = 0; run_number < 10; ++run_number) {
    comm::testing::TemporaryDirectory pids;
    ChildProcess run({commrun(), "-n", "4", "sh", "-c",
                      "echo $$ > " + pids.path().string() + "/$RANK; exec " + helper() + " ring-stream"});
    auto ranks = rank_pids(pids.path(), 4);
    std::this_thread::sleep_for(500ms);  // streaming all_reduce over shared memory by now
    int victim = 1 + run_number % 3;
    ::kill(ranks[victim], SIGKILL);
    auto status = run.wait_for(30s);
    REQUIRE(status.has_value());
    INFO("run " << run_number << ", rank " << victim << " killed:\n" << run.output());
    CHECK(*status == 128 + SIGKILL);
    CHECK_THAT(run.output(), ContainsSubstring("rank " + std::to_string(victim) + " was killed by signal 9"));
  }
}

// Issue 15, finding 6: a rank stopped by commrun in the middle of its shared-memory set-up left
// its segments in /dev/shm (SIGTERM runs no destructor).
TEST_CASE("commrun removes the shared memory of ranks it stopped mid-set-up", "[launcher]") {
  ChildProcess run({commrun(), "-n", "2", helper(), "linger-shm"});
  auto status = run.wait_for(30s);
  REQUIRE(status.has_value());
  std::string output = run.output();
  INFO(output);
  REQUIRE_THAT(output, ContainsSubstring("created /comm-lingertest-"));
  auto at = output.find("/comm-lingertest-");
  std::string name = output.substr(at + 1, output.find('\n', at) - at - 1);
  CHECK_FALSE(std::filesystem::exists("/dev/shm/" + name));
}

TEST_CASE("commrun forwards SIGTERM and SIGINT to every rank", "[launcher]") {
  int signal_number = GENERATE(SIGTERM, SIGINT);
  comm::testing::TemporaryDirectory pids;
  ChildProcess run({commrun(), "-n", "2", helper(), "exit", "0", "99", "0", pids.path().string()});
  auto ranks = rank_pids(pids.path(), 2);
  run.signal(signal_number);
  auto status = run.wait_for(10s);
  REQUIRE(status.has_value());
  CHECK(*status == 128 + signal_number);
  CHECK(all_gone_within(ranks, 5s));
}

TEST_CASE("commrun reports programs it cannot start and bad options", "[launcher]") {
  ChildProcess missing({commrun(), "-n", "2", "/no/such/program"});
  CHECK(missing.wait_for(10s) == 127);
  CHECK_THAT(missing.output(), ContainsSubstring("cannot execute '/no/such/program'"));
  for (auto arguments : std::vector<std::vector<std::string>>{{"-n", "0", "x"},
                                                              {"-n", "two", "x"},
                                                              {"--nnodes", "2", "--node-rank", "2", "x"},
                                                              {"--frobnicate", "x"},
                                                              {"-n", "2"},
                                                              {"--nnodes", "2", "--node-rank", "1", "x"},
                                                              {"--master-port", "70000", "x"}}) {
    arguments.insert(arguments.begin(), commrun());
    ChildProcess bad(arguments);
    CHECK(bad.wait_for(10s) == 2);
  }
}

// Issue 15, finding 2: a client that read the job token out of the store joined the job.
TEST_CASE("commrun gives its job a secret that strangers cannot get past", "[launcher][auth]") {
  ChildProcess run({commrun(), "-n", "3", helper(), "store-secrecy"});
  REQUIRE(run.wait_for(60s) == 0);
  auto output = run.output();
  INFO(output);
  CHECK_THAT(output, ContainsSubstring("[0] secret given: yes"));
  CHECK_THAT(output, ContainsSubstring("admits only processes that hold the job secret"));
  CHECK_THAT(output, ContainsSubstring("[0] token in store: no"));
}

TEST_CASE("two commruns form one job across 'nodes'", "[launcher]") {
  std::string port = std::to_string(comm::testing::free_port());
  // Without a secret of the user's the job runs, and says it is unauthenticated; with one, both
  // nodes' ranks prove it.
  bool with_secret = GENERATE(false, true);
  std::map<std::string, std::string> environment;
  if (with_secret) environment["COMM_JOB_TOKEN"] = "two-node-secret-" + port;
  ChildProcess node0(
      {commrun(), "--nnodes", "2", "--node-rank", "0", "--master-port", port, "-n", "2", helper(), "init"},
      environment);
  ChildProcess node1({commrun(), "--nnodes=2", "--node_rank=1", "--master-addr", "127.0.0.1", "--master-port", port,
                      "--nproc-per-node", "2", helper(), "init"},
                     environment);
  auto status0 = node0.wait_for(30s);
  auto status1 = node1.wait_for(30s);
  INFO(node0.output() << node1.output());
  CHECK(status0 == 0);
  CHECK(status1 == 0);
  CHECK_THAT(node0.output(),
             ContainsSubstring("[0] joined 0/4 local 0/2") && ContainsSubstring("[1] joined 1/4 local 1/2"));
  CHECK_THAT(node1.output(),
             ContainsSubstring("[2] joined 2/4 local 0/2") && ContainsSubstring("[3] joined 3/4 local 1/2"));
  CHECK((node0.output().find("runs unauthenticated") != std::string::npos) == !with_secret);
}
