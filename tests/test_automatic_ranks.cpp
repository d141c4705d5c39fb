// Automatic ranks (issue 19): with a world size and no rank, file://, tcp:// and a caller's store
// hand ranks out in arrival order. Real processes started in a random order; every rank must be
// taken exactly once and the group must compute right afterwards.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <future>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "comm/comm.hpp"
#include "rendezvous/init_method.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::ChildProcess;

namespace {

std::string helper() { return comm::testing::program_path("COMM_TEST_HELPER"); }

struct Process {
  std::unique_ptr<ChildProcess> child;
  std::string job;
};

// Starts one `comm-test-helper init URL -1 WORLD GROUP` per entry of `jobs` (its group name),
// in a shuffled order with random pauses between starts.
std::vector<Process> start_shuffled(const std::string& url, int world_size, std::vector<std::string> jobs,
                                    std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::shuffle(jobs.begin(), jobs.end(), random);
  std::vector<Process> processes;
  for (const auto& job : jobs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 120));
    processes.push_back(
        {std::make_unique<ChildProcess>(
             std::vector<std::string>{helper(), "init", url, "-1", std::to_string(world_size), job, "30000"},
             std::map<std::string, std::string>{{"COMM_LOG_LEVEL", "info"}}),
         job});
  }
  return processes;
}

// Every process of each job joined with a distinct rank covering 0..world_size-1, logged the
// rank it was handed, and computed the right sum with its group.
void check_jobs(std::vector<Process>& processes, int world_size) {
  std::map<std::string, std::multiset<int>> ranks_of;
  static const std::regex joined(R"(joined (\d+)/(\d+))");
  for (auto& process : processes) {
    auto status = process.child->wait_for(60s);
    std::string output = process.child->output();
    INFO(process.job << ": " << output);
    REQUIRE(status.has_value());
    CHECK(*status == 0);
    std::smatch match;
    REQUIRE(std::regex_search(output, match, joined));
    int rank = std::stoi(match[1]);
    CHECK(std::stoi(match[2]) == world_size);
    if (world_size > 1) {  // a world of one is rank 0 without asking a store
      CHECK_THAT(output, ContainsSubstring("rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                                           " in group '" + process.job + "', handed out in arrival order"));
    }
    CHECK_THAT(output, ContainsSubstring("sum ok " + std::to_string(world_size * (world_size + 1) / 2)));
    ranks_of[process.job].insert(rank);
  }
  for (const auto& [job, ranks] : ranks_of) {
    INFO("job " << job);
    std::multiset<int> expected;
    for (int rank = 0; rank < world_size; ++rank) expected.insert(rank);
    CHECK(ranks == expected);
  }
}

std::uint64_t fresh_seed() {
  static std::random_device device;
  return (std::uint64_t(device()) << 32) | device();
}

}  // namespace

TEST_CASE("automatic ranks over file:// for 1..8 processes started in random order", "[init][automatic]") {
  int world_size = GENERATE(1, 2, 3, 5, 8);
  auto seed = fresh_seed();
  INFO("world size " << world_size << ", seed " << seed);
  comm::testing::TemporaryDirectory directory;
  auto processes = start_shuffled("file://" + (directory.path() / "sharedfile").string(), world_size,
                                  std::vector<std::string>(world_size, "default_pg"), seed);
  check_jobs(processes, world_size);
  CHECK_FALSE(std::filesystem::exists(directory.path() / "sharedfile"));  // the last one out removed it
}

TEST_CASE("automatic ranks over tcp:// for 2..8 processes started in random order", "[init][automatic]") {
  int world_size = GENERATE(2, 4, 8);
  auto seed = fresh_seed();
  INFO("world size " << world_size << ", seed " << seed);
  // Whichever process binds the port first serves the store; its rank is whatever it drew.
  std::string url = "tcp://127.0.0.1:" + std::to_string(comm::testing::free_port());
  auto processes = start_shuffled(url, world_size, std::vector<std::string>(world_size, "default_pg"), seed);
  check_jobs(processes, world_size);
}

TEST_CASE("two jobs on one file with different group names keep their ranks apart", "[init][automatic]") {
  auto seed = fresh_seed();
  INFO("seed " << seed);
  comm::testing::TemporaryDirectory directory;
  std::vector<std::string> jobs{"job-a", "job-a", "job-a", "job-b", "job-b", "job-b"};
  auto processes = start_shuffled("file://" + (directory.path() / "sharedfile").string(), 3, jobs, seed);
  check_jobs(processes, 3);
}

TEST_CASE("automatic ranks through a store the caller brings", "[init][automatic]") {
  auto store = std::make_shared<comm::HashStore>();
  std::vector<std::future<std::shared_ptr<comm::ProcessGroup>>> threads;
  for (int thread = 0; thread < 4; ++thread) {
    threads.push_back(std::async(std::launch::async, [&] {
      return comm::init_process_group({.world_size = 4, .timeout = 20s, .store = store});
    }));
  }
  std::set<int> ranks;
  for (auto& thread : threads) {
    auto group = thread.get();
    CHECK(group->size() == 4);
    ranks.insert(group->rank());
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("a job mixing given and automatic ranks fails on every process", "[init][automatic][bad-input]") {
  auto store = std::make_shared<comm::HashStore>();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::future<std::string>> threads;
  for (int thread = 0; thread < 3; ++thread) {
    threads.push_back(std::async(std::launch::async, [&, thread] {
      // The given rank comes last (2): without the check it would fill the hole automatic
      // ranks 0 and 1 leave, and the job would start half-assigned.
      if (thread == 2) std::this_thread::sleep_for(200ms);
      try {
        comm::init_process_group({.rank = thread == 2 ? 2 : -1, .world_size = 3, .timeout = 20s, .store = store});
        return std::string("joined");
      } catch (const comm::MismatchError& error) {
        return std::string(error.what());
      }
    }));
  }
  for (auto& thread : threads) {
    CHECK_THAT(thread.get(), ContainsSubstring("got their ranks in two ways") &&
                                 ContainsSubstring("give every process of the job a rank, or none"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("more processes than the world size: the extra one is told, the job is not joined",
          "[init][automatic][bad-input]") {
  auto store = std::make_shared<comm::HashStore>();
  auto join = [&] { return comm::init_process_group({.world_size = 2, .timeout = 5s, .store = store}); };
  auto first = std::async(std::launch::async, join), second = std::async(std::launch::async, join);
  CHECK(first.get()->rank() + second.get()->rank() == 1);
  auto start = std::chrono::steady_clock::now();
  try {
    join();
    FAIL("a third process took a rank of a world of 2");
  } catch (const comm::InvalidArgumentError& error) {
    CHECK_THAT(std::string(error.what()), ContainsSubstring("all 2 ranks of group 'default_pg'") &&
                                              ContainsSubstring("this is process 3") &&
                                              ContainsSubstring("group_name"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("env:// still needs a rank", "[init][automatic][bad-input]") {
  CHECK_THROWS_WITH(comm::init_process_group({.init_method = "env://", .world_size = 2, .timeout = 1s}),
                    ContainsSubstring("rank unknown") && ContainsSubstring("file:// or tcp://"));
}

TEST_CASE("tcp:// with a multicast address is multicast discovery", "[init][automatic][multicast]") {
  using Kind = comm::InitMethod::Kind;
  const std::vector<std::pair<std::string, Kind>> table{
      {"tcp://224.0.0.1:23456", Kind::Multicast},
      {"tcp://239.255.255.255:1", Kind::Multicast},
      {"tcp://[ff15:1e18:5d4c:4cf0:d02d:b659:53ba:b0a7]:23456", Kind::Multicast},
      {"tcp://[ff02::1]:9", Kind::Multicast},
      {"tcp://223.255.255.255:1", Kind::Tcp},
      {"tcp://240.0.0.1:1", Kind::Tcp},
      {"tcp://[fe80::1]:1", Kind::Tcp},
      {"tcp://224.example.org:1", Kind::Tcp},
  };
  for (const auto& [url, kind] : table) {
    INFO(url);
    CHECK(comm::parse_init_method(url).kind == kind);
  }
}

TEST_CASE("multicast discovery refuses what cannot travel or cannot be used",
          "[init][automatic][multicast][bad-input]") {
  CHECK_THROWS_WITH(comm::init_process_group({.init_method = "tcp://224.1.2.3:23456",
                                              .world_size = 2,
                                              .timeout = 2s,
                                              .group_name = std::string(300, 'g')}),
                    ContainsSubstring("is 300 bytes; multicast discovery takes at most 256"));
  // A bad interface choice is refused before anything is announced.
  ChildProcess child({helper(), "init", "tcp://224.1.2.3:23456", "-1", "2", "", "2000"},
                     {{"COMM_SOCKET_IFNAME", "=no-such-interface0"}});
  REQUIRE(child.wait_for(20s).has_value());
  CHECK_THAT(child.output(), ContainsSubstring("COMM_SOCKET_IFNAME='=no-such-interface0' matches no interface that is "
                                               "up, can multicast and has an IPv4 address"));
  ChildProcess hops({helper(), "init", "tcp://224.1.2.3:23456", "-1", "2", "", "2000"}, {{"COMM_MULTICAST_TTL", "0"}});
  REQUIRE(hops.wait_for(20s).has_value());
  CHECK_THAT(hops.output(), ContainsSubstring("COMM_MULTICAST_TTL"));
}
