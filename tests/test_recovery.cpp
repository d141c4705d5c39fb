// Revoke and shrink (issue 32): ranks as processes (comm-recovery-worker) joined through a
// store this test hosts, killed with SIGKILL at chosen moments; the survivors must agree on one
// group, redo the interrupted step and end with the same parameters as a reference computed
// here, over shared memory and over TCP.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "comm/store.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::ChildProcess;

namespace {

struct Job {
  std::unique_ptr<comm::TcpStoreServer> server = std::make_unique<comm::TcpStoreServer>(0, "127.0.0.1", "");
  std::vector<std::unique_ptr<ChildProcess>> ranks;

  Job() = default;  // ranks added with start()
  Job(int size, const std::vector<std::string>& arguments, const std::string& transport) {
    for (int rank = 0; rank < size; ++rank) start(rank, size, arguments, transport);
  }
  void start(int rank, int size, const std::vector<std::string>& arguments, const std::string& transport) {
    {
      std::vector<std::string> argv{comm::testing::program_path("COMM_RECOVERY_WORKER")};
      argv.insert(argv.end(), arguments.begin(), arguments.end());
      ranks.push_back(std::make_unique<ChildProcess>(
          argv, std::map<std::string, std::string>{{"RANK", std::to_string(rank)},
                                                   {"WORLD_SIZE", std::to_string(size)},
                                                   {"MASTER_ADDR", "127.0.0.1"},
                                                   {"MASTER_PORT", std::to_string(server->port())},
                                                   {"COMM_TRANSPORT", transport},
                                                   {"COMM_HANG_REPORT", "0"}}));
    }
  }
  // Every rank's exit code (137: killed), waiting at most `limit` for each.
  std::vector<int> wait(std::chrono::milliseconds limit) {
    std::vector<int> codes;
    for (auto& rank : ranks) codes.push_back(rank->wait_for(limit).value_or(-1));
    return codes;
  }
  std::string output(int rank) const { return ranks[static_cast<std::size_t>(rank)]->output(); }
};

// Nothing named after any of the job's processes stays in /dev/shm.
void check_nothing_left(const Job& job) {
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    for (const auto& rank : job.ranks) CHECK(name.find("-" + std::to_string(rank->pid()) + "-") == std::string::npos);
  }
}

// The parameters' sums the worker may print, computed independently. Every step, every rank
// alive at it adds its gradient (the worker's formula), and the parameters lose the sum. A rank
// killed at step k (`dies_at_step`) counts up to step k-1, or one step less or more: the
// survivors redo the step any of them failed, and a rank killed before step k may have left
// some still finishing step k-1, one killed during step k (or after it) may have given every
// survivor its part of step k.
std::set<double> reference_sums(int size, int steps, const std::map<int, int>& dies_at_step,
                                std::size_t count = 1 << 17) {
  std::vector<double> per_rank_step(static_cast<std::size_t>(size * steps), 0.0);
  for (int rank = 0; rank < size; ++rank) {
    for (int step = 0; step < steps; ++step) {
      double sum = 0;
      for (std::size_t i = 0; i < count; ++i) sum -= double((rank + 1) * (int(i % 7) + 1) * (step + 1) % 1000);
      per_rank_step[static_cast<std::size_t>(rank * steps + step)] = sum;
    }
  }
  std::set<double> sums;
  std::vector<std::pair<int, int>> deaths(dies_at_step.begin(), dies_at_step.end());
  int combinations = 1;
  for (std::size_t i = 0; i < deaths.size(); ++i) combinations *= 3;
  for (int combination = 0; combination < combinations; ++combination) {
    std::map<int, int> counted_until;  // steps < this count
    for (std::size_t i = 0, code = static_cast<std::size_t>(combination); i < deaths.size(); ++i, code /= 3) {
      counted_until[deaths[i].first] = deaths[i].second - 1 + static_cast<int>(code % 3);
    }
    double total = 0;
    for (int rank = 0; rank < size; ++rank) {
      int until = counted_until.count(rank) != 0 ? counted_until[rank] : steps;
      for (int step = 0; step < std::min(until, steps); ++step)
        total += per_rank_step[static_cast<std::size_t>(rank * steps + step)];
    }
    sums.insert(total);
  }
  return sums;
}

struct Final {
  int size = -1;
  std::string checksum;
  double sum = 0;
};

Final final_line(const std::string& output) {
  std::smatch match;
  static const std::regex line(R"(final (\d+) (\d+) sum (\S+))");
  Final result;
  if (std::regex_search(output, match, line)) {
    result.size = std::stoi(match[1]);
    result.checksum = match[2];
    result.sum = std::stod(match[3]);
  }
  return result;
}

}  // namespace

TEST_CASE("a revoke fails every rank's call at once, names its rank, and the group shrinks to all four", "[recovery]") {
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(4, {"revoke"}, transport);
  auto codes = job.wait(30s);
  for (int rank = 0; rank < 4; ++rank) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    CHECK_THAT(output, ContainsSubstring("RevokedError peer=1") && ContainsSubstring("the test says so"));
    CHECK_THAT(output, ContainsSubstring("barrier revoked"));
    CHECK_THAT(output, ContainsSubstring("shrunk size=4 rank=" + std::to_string(rank) + " sum=10"));
  }
  check_nothing_left(job);
}

TEST_CASE("training goes on without a rank killed mid-step, with the same parameters on every survivor", "[recovery]") {
  auto [transport, kills, deaths] = GENERATE(table<std::string, std::string, std::map<int, int>>({
      {"shm", "2@3", {{2, 3}}},
      {"tcp", "2@3", {{2, 3}}},
      {"shm", "1@2:during", {{1, 2}}},
      {"tcp", "3@2:during", {{3, 2}}},
      {"shm", "0@4", {{0, 4}}},  // the lowest rank: the agreement's first coordinator
      {"tcp", "0@1:during,2@3", {{0, 1}, {2, 3}}},
      {"shm", "1@2,3@2:shrink", {{1, 2}, {3, 2}}},  // rank 3 dies while the others shrink
      {"tcp", "2@2,0@2:shrink", {{2, 2}, {0, 2}}},  // so does rank 0, the first coordinator
  }));
  INFO("transport " << transport << ", kills " << kills);
  const int steps = 6;
  Job job(4, {"train", std::to_string(steps), kills}, transport);
  auto codes = job.wait(60s);
  std::set<double> expected = reference_sums(4, steps, deaths);
  std::set<std::string> checksums;
  for (int rank = 0; rank < 4; ++rank) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    if (deaths.count(rank) != 0) {
      CHECK(codes[static_cast<std::size_t>(rank)] == 128 + 9);
      continue;
    }
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    Final final = final_line(output);
    CHECK(final.size == 4 - static_cast<int>(deaths.size()));
    INFO("sum " << final.sum);
    CHECK(expected.count(final.sum) == 1);
    checksums.insert(final.checksum);
  }
  CHECK(checksums.size() == 1);
  check_nothing_left(job);
}

// Rank 2 stops because rank 3 died (its world call failed) while rank 0 waits for it in another
// group: before a revocation's cause went into the Goodbye, rank 0 heard only that rank 2 had
// destroyed its group (the fault suite's kill-mid cases failed one time in six).
TEST_CASE("a rank that leaves over a revocation tells the peers it leaves waiting why", "[recovery]") {
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(4, {"left-behind"}, transport);
  auto codes = job.wait(30s);
  CHECK(codes[3] == 128 + 9);
  for (int rank = 0; rank < 3; ++rank) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    CHECK_THAT(output, ContainsSubstring("failed peer=3") && ContainsSubstring("rank 3"));
  }
}

TEST_CASE("the survivors grow back: a newcomer joins the running group and gets the model", "[recovery]") {
  // Also: the survivors let go of what they held of the dead rank.
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(4, {"grow"}, transport);
  job.start(4, 4, {"newcomer"}, transport);  // its RANK is only for its lines: it gets its rank from the group
  auto codes = job.wait(60s);
  CHECK(codes[2] == 128 + 9);
  std::set<int> ranks;
  for (int process : {0, 1, 3, 4}) {
    std::string output = job.output(process);
    INFO("process " << process << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(process)] == 0);
    std::smatch match;
    static const std::regex line(R"(grown size=4 rank=(\d) sum=10 model ok)");
    REQUIRE(std::regex_search(output, match, line));
    ranks.insert(std::stoi(match[1]));
    if (process == 4) continue;
    // What a survivor held of the dead rank is let go once its death is seen: its connection
    // (the pair's segments, or its socket). The old group, still held, keeps the rest.
    static const std::regex holds(
        R"(holds before mappings=(\d+) sockets=(\d+)[\s\S]*holds after mappings=(\d+) sockets=(\d+))");
    REQUIRE(std::regex_search(output, match, holds));
    if (transport == "shm") CHECK(std::stoi(match[3]) < std::stoi(match[1]));
    CHECK(std::stoi(match[4]) == std::stoi(match[2]) - 1);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK_THAT(job.output(4), ContainsSubstring("grown size=4 rank=3"));  // the newcomer comes last
  check_nothing_left(job);
}

// Before: a newcomer read the latest growth's record, whatever it was; the one that came for
// the second death took the first growth's record, found its place taken and failed, and the
// survivors' second grow waited out its timeout.
TEST_CASE("two deaths, two growths: a newcomer that finds a growth's places taken waits for the next", "[recovery]") {
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(4, {"grow-twice"}, transport);
  job.start(4, 4, {"newcomer-twice"}, transport);
  job.start(5, 4, {"newcomer-twice"}, transport);
  auto codes = job.wait(60s);
  CHECK(codes[1] == 128 + 9);
  CHECK(codes[2] == 128 + 9);
  std::map<int, int> growths_seen;  // process -> "grown" lines
  for (int process : {0, 3, 4, 5}) {
    std::string output = job.output(process);
    INFO("process " << process << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(process)] == 0);
    static const std::regex line(R"(grown size=4 rank=\d sum=10 model ok)");
    growths_seen[process] = static_cast<int>(
        std::distance(std::sregex_iterator(output.begin(), output.end(), line), std::sregex_iterator()));
  }
  CHECK(growths_seen[0] == 2);
  CHECK(growths_seen[3] == 2);
  CHECK(growths_seen[4] + growths_seen[5] == 3);  // one newcomer in both growths, the other in the second
  CHECK_THAT(job.output(4) + job.output(5),
             ContainsSubstring("joined in round 1") && ContainsSubstring("joined in round 2"));
  check_nothing_left(job);
}

TEST_CASE("a sub-group shrinks the same way, and the world after it", "[recovery]") {
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(4, {"subgroup"}, transport);
  auto codes = job.wait(60s);
  CHECK(codes[2] == 128 + 9);
  for (int rank : {0, 1, 3}) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    if (rank < 2) CHECK_THAT(output, ContainsSubstring("part shrunk size=2 sum=3"));  // ranks 0 and 1: 1 + 2
    CHECK_THAT(output, ContainsSubstring("world shrunk size=3 sum=7"));               // 1 + 2 + 4
  }
}

TEST_CASE("after abort() shrink and grow fail at once on every rank, as every call does", "[recovery]") {
  // Before: shrink returned a working group of one on every rank (every peer looked dead to an
  // aborted transport) and grow opened places and waited out the timeout (issue 44, finding 2).
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(3, {"after-abort"}, transport);
  auto codes = job.wait(30s);
  static const std::regex refused(R"(refused (\S+) [a-z ]+ (\d+) ms)");
  for (int rank = 0; rank < 3; ++rank) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    CHECK_THAT(output, !ContainsSubstring("went through") && !ContainsSubstring("gave size"));
    std::set<std::string> calls;
    for (std::sregex_iterator it(output.begin(), output.end(), refused), end; it != end; ++it) {
      calls.insert((*it)[1]);
      CHECK(std::stoi((*it)[2]) < 1000);
    }
    CHECK(calls == std::set<std::string>{"shrink", "shrink-excluding", "grow", "all_reduce"});
  }
  check_nothing_left(job);
}

TEST_CASE("a rank frozen during shrink is the one the others' errors name, not the live coordinator", "[recovery]") {
  // Before: the coordinator and the other survivor gave up at the same moment, and the survivor's
  // error named the coordinator (rank 0), alive and waiting like itself (issue 44, finding 3).
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job(3, {"frozen-shrink"}, transport);
  static const std::regex failed(R"(shrink failed peer=(-?\d+) timeout (\d+) ms)");
  for (int rank = 0; rank < 2; ++rank) {
    auto code = job.ranks[static_cast<std::size_t>(rank)]->wait_for(30s);
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(code.value_or(-1) == 0);
    std::smatch match;
    REQUIRE(std::regex_search(output, match, failed));
    CHECK(match[1] == "2");
    CHECK(std::stoi(match[2]) < 8000);  // the 3 s timeout, and the 2 s a survivor waits past it at most
    CHECK_THAT(output, ContainsSubstring("rank 2's proposal"));
  }
}

TEST_CASE("survivors that pass different lists never end in two groups; a live rank left out is told so",
          "[recovery]") {
  // Before: ranks 0 and 1 made a group of two, and rank 2, alive and calling shrink, waited for
  // rank 0's decision until ranks 0 and 1 exited, took them for dead and returned a group of
  // itself alone, whose collectives "succeeded" on its own data (issue 44, finding 1).
  std::string transport = GENERATE("shm", "tcp");
  INFO("transport " << transport);
  Job job;
  const char* lists[] = {"2", "-", "-"};
  for (int rank = 0; rank < 3; ++rank) job.start(rank, 3, {"agree", lists[rank], "call"}, transport);
  auto codes = job.wait(30s);
  for (int rank = 0; rank < 3; ++rank) {
    std::string output = job.output(rank);
    INFO("rank " << rank << ":\n" << output);
    CHECK(codes[static_cast<std::size_t>(rank)] == 0);
    if (rank < 2) {
      CHECK_THAT(output, ContainsSubstring("agree members=0,1"));
    } else {
      CHECK_THAT(output, ContainsSubstring("agree error peer closed") &&
                             ContainsSubstring("rank 0, coordinating, left this rank out"));
    }
  }
  check_nothing_left(job);
}
