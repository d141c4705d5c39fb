// The media behind the message layer (transport/media.hpp): a job names one or lets the set-up
// choose, and the third medium, memory, carries a whole group whose ranks are threads of one
// process through init_process_group, the real message layer and every algorithm the tuner
// picks: the proof that a medium is one folder and one line in the list.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/thread_ranks.hpp"

using namespace std::chrono_literals;
using comm::testing::ChildProcess;

namespace {

// Every rank all_reduces its own random doubles (count of them); returns how many elements differ
// from the sum computed here from every rank's input, in double. (Catch's checks are for the
// main thread: the ranks' threads return what they found.)
std::size_t wrong_all_reduce(comm::ProcessGroup& group, std::size_t count) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int rank = 0; rank < group.size(); ++rank) {
    std::mt19937 random(1000 + rank);
    inputs.push_back(comm::testing::random_buffer(comm::DType::Float64, count, random));
  }
  auto mine = inputs[static_cast<std::size_t>(group.rank())];
  group.all_reduce(comm::Buffer(mine.data(), count, comm::DType::Float64));
  return comm::testing::count_wrong(mine, inputs, comm::DType::Float64, comm::ReduceOp::Sum, count);
}

}  // namespace

TEST_CASE("a group of threads runs over the memory medium", "[media]") {
  int ranks = GENERATE(2, 3, 5);
  bool lazily = GENERATE(false, true);
  INFO(ranks << " ranks" << (lazily ? ", connected on first use" : ""));
  if (lazily) ::setenv("COMM_CONNECT", "lazy", 1);
  std::vector<std::string> media(static_cast<std::size_t>(ranks));
  std::vector<std::size_t> wrong(static_cast<std::size_t>(ranks), 0);
  std::vector<std::int64_t> received(static_cast<std::size_t>(ranks), -1);
  comm::testing::run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        auto me = static_cast<std::size_t>(group.rank());
        media[me] = group.transport_name();
        // Eager and rendezvous sizes, so both of the protocol's paths cross the pipes.
        for (std::size_t count : {1ul, 1000ul, 300000ul}) wrong[me] += wrong_all_reduce(group, count);
        // Point to point, around the ring: each rank hears its left neighbour's rank.
        int right = (group.rank() + 1) % group.size(), left = (group.rank() + group.size() - 1) % group.size();
        std::int64_t sent = group.rank() * 7 + 1;
        auto send = group.isend(comm::Buffer(&sent, 1, comm::DType::Int64), right);
        group.recv(comm::Buffer(&received[me], 1, comm::DType::Int64), left);
        send->wait();
        group.barrier();
      },
      30s, "memory");
  ::unsetenv("COMM_CONNECT");
  for (int rank = 0; rank < ranks; ++rank) {
    INFO("rank " << rank);
    auto me = static_cast<std::size_t>(rank);
    CHECK(media[me] == "memory");
    CHECK(wrong[me] == 0);
    CHECK(received[me] == (rank + ranks - 1) % ranks * 7 + 1);
  }
}

TEST_CASE("a medium that is not there is refused, naming the ones there are", "[media]") {
  try {
    comm::testing::run_ranks(
        2, [](comm::ProcessGroup&) { FAIL("the group was made"); }, 10s, "rdma");
    FAIL("no error");
  } catch (const comm::InvalidArgumentError& error) {
    std::string text = error.what();
    CHECK(text.find("transport 'rdma' (InitOptions::transport) is not one of auto, shm, tcp, memory") !=
          std::string::npos);
  }
}

// Asked for by name, a medium must reach every peer: ranks in two processes cannot share an
// in-process pipe: the set-up says which peer is not a thread beside it and what to use instead.
TEST_CASE("the memory medium between processes fails at init, naming the peer", "[media]") {
  auto port = std::to_string(comm::testing::free_port());
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{comm::testing::program_path("COMM_TEST_HELPER"), "init", "tcp://127.0.0.1:" + port,
                                 std::to_string(rank), "2", "", "20000"},
        std::map<std::string, std::string>{{"COMM_TRANSPORT", "memory"}}));
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto& child = *ranks[static_cast<std::size_t>(rank)];
    REQUIRE(child.wait_for(20s) == 10);
    std::string output = child.output();
    INFO(output);
    // (The first rank to find it publishes it; every rank reports that cause.)
    CHECK(output.find("COMM_TRANSPORT=memory (or InitOptions::transport) asks for memory, but rank ") !=
          std::string::npos);
    // Named from the side of the rank that found it, which is not always the one reporting.
    CHECK(std::regex_search(output, std::regex("but rank ([01]) \\(.*\\) is not a thread of rank ([01])'s process; "
                                               "use auto or tcp")));
    std::smatch names;
    REQUIRE(std::regex_search(output, names, std::regex("but rank ([01]) .* of rank ([01])'s process")));
    CHECK(names[1] != names[2]);
  }
}
