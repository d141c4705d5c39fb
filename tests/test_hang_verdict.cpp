// Issue 15, finding 4: a rank that stops calling collectives (sleeping, or in a call of another
// group) produced nothing for 30 minutes. Now the ranks that wait say, within the report
// threshold and two seconds, where every rank is; and a timeout's message is that verdict.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::ChildProcess;

namespace {

std::string commrun() { return comm::testing::program_path("COMMRUN"); }
std::string helper() { return comm::testing::program_path("COMM_TEST_HELPER"); }

}  // namespace

// The helper's "hang" mode: rank n-2 sleeps in user code for SECONDS, rank n-1 waits for it in
// a call of their two-rank subgroup, and every other rank waits in the world's all_reduce #1.
// Sleeping the threshold plus three seconds, the verdict can only name the sleeper as outside any
// collective if the ranks compared notes within that bound (a watch's look, 250 ms, and the
// verdict's wait for records, at most 2 s).
TEST_CASE("waiting ranks name the sleeping rank and the rank busy in another group", "[hang]") {
  std::string transport = GENERATE("shm", "tcp");
  int ranks = GENERATE(4, 8);
  INFO(transport << ", " << ranks << " ranks");
  ChildProcess run({commrun(), "-n", std::to_string(ranks), helper(), "hang", "5"},
                   {{"COMM_HANG_REPORT", "2"}, {"COMM_TRANSPORT", transport}});
  REQUIRE(run.wait_for(60s) == 0);
  std::string output = run.output();
  INFO(output);
  std::string sleeper = std::to_string(ranks - 2), busy = std::to_string(ranks - 1);
  std::string waiters = ranks == 4 ? "ranks 0-1" : "ranks 0-5";
  for (int rank = 0; rank < ranks - 2; ++rank) {
    std::string r = std::to_string(rank);
    CHECK_THAT(output, ContainsSubstring("[" + r + "] [rank " + r + "/" + std::to_string(ranks) +
                                         "] comm.group warning: all_reduce #1 (float32 x 1024, group default_pg) "
                                         "has waited 2 s: " +
                                         waiters + " are in all_reduce #1 (waiting on "));
  }
  CHECK_THAT(output, ContainsSubstring("; rank " + busy + " is in all_reduce #0 of group default_pg/group"));
  CHECK_THAT(output, ContainsSubstring("; rank " + sleeper + " is not in any collective (last: all_reduce #0) since "));
  // The subgroup's waiter speaks for its group too.
  CHECK_THAT(output, ContainsSubstring("[" + busy + "] [rank " + busy + "/" + std::to_string(ranks) +
                                       "] comm.group warning: all_reduce #0 (float64 x 1, group default_pg/group"));
  for (int rank = 0; rank < ranks; ++rank) {
    CHECK_THAT(output, ContainsSubstring("hang resolved on rank " + std::to_string(rank)));
  }
}

TEST_CASE("a collective's timeout says where every rank is", "[hang]") {
  ChildProcess run({commrun(), "-n", "4", helper(), "hang", "10"}, {{"COMM_TIMEOUT", "3"}, {"COMM_TRANSPORT", "tcp"}});
  auto status = run.wait_for(60s);
  REQUIRE(status.has_value());
  CHECK(*status != 0);
  std::string output = run.output();
  INFO(output);
  // Whichever waiting rank times out first (rank 0 in the world's call, rank 3 in the pair's),
  // its error is the verdict, naming the sleeping rank.
  CHECK_THAT(output, ContainsSubstring("] ERROR [rank ") && ContainsSubstring(" has waited 3 s: ") &&
                         ContainsSubstring("rank 2 is not in any collective"));
}

// The hierarchy runs its phases on parts of the group (a host's ranks, one rank per host), which
// number their ranks from 0: waits named those numbers, so rank 0, waiting across hosts on rank
// 2, was reported as waiting on rank 1, and rank 1 as waiting on itself.
TEST_CASE("waits inside a hierarchical call name ranks as the group numbers them", "[hang]") {
  ChildProcess run({commrun(), "-n", "4", helper(), "hang", "5", "hierarchical"},
                   {{"COMM_HANG_REPORT", "2"}, {"COMM_TRANSPORT", "tcp"}});
  REQUIRE(run.wait_for(60s) == 0);
  std::string output = run.output();
  INFO(output);
  CHECK_THAT(output, ContainsSubstring("ranks 0-1 are in all_reduce #1 (waiting on ranks 2-3)"));
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_THAT(output, ContainsSubstring("hang resolved on rank " + std::to_string(rank)));
  }
}
