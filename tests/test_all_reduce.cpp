// all_reduce: every algorithm x dtype x valid op x world size over both transports, against a
// reference computed in the test (double for floats, exact for integers), and bitwise-identical
// bytes on every rank whatever the algorithm.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "algorithms/reduce.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/thread_ranks.hpp"

using comm::testing::RankChecks;
using comm::testing::run_ranks;
using namespace comm::testing;

namespace {

constexpr std::string_view kAllReduceAlgorithms[] = {"ring", "tree", "recursive_doubling", "shared_memory",
                                                     "halving_doubling"};

// Shared memory needs every rank on one host over shm (or a group of one).
bool usable(std::string_view algorithm, const comm::ProcessGroup& group) {
  return algorithm != "shared_memory" || group.size() == 1 || std::string(group.transport_name()) == "shm";
}

struct Case {
  DType dtype;
  ReduceOp op;
  std::size_t count;
};

using Inputs = std::vector<std::vector<std::uint8_t>>;

// Runs every case with every algorithm on `ranks` ranks; checks values on each rank and that
// all ranks hold the same bytes.
void check_all_reduce(int ranks, const std::string& transport, const std::vector<Case>& cases) {
  std::vector<Inputs> inputs;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    inputs.push_back(all_inputs(ranks, cases[c].dtype, cases[c].count, static_cast<unsigned>(c)));
  }
  RankChecks checks;
  std::mutex mutex;
  std::map<std::tuple<std::string_view, std::size_t, int>, std::vector<std::uint8_t>>
      results;  // (algorithm, case, rank)
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        for (std::string_view algorithm : kAllReduceAlgorithms) {
          if (!usable(algorithm, group)) continue;
          for (std::size_t c = 0; c < cases.size(); ++c) {
            auto [dtype, op, count] = cases[c];
            std::vector<std::uint8_t> data = inputs[c][static_cast<std::size_t>(group.rank())];
            group.all_reduce(comm::Buffer(data.data(), count, dtype), op, algorithm);
            std::size_t wrong = count_wrong(data, inputs[c], dtype, op, count);
            checks.check(wrong == 0, "values match the reference", __LINE__,
                         std::string(algorithm) + " " + comm::to_string(dtype) + " " + comm::to_string(op) + " count " +
                             std::to_string(count) + ": " + std::to_string(wrong) + " wrong on rank " +
                             std::to_string(group.rank()));
            std::lock_guard lock(mutex);
            results[{algorithm, c, group.rank()}] = std::move(data);
          }
        }
      },
      std::chrono::seconds(120), transport);
  REQUIRE_RANK_CHECKS(checks);
  std::size_t differing = 0;
  for (const auto& [key, bytes] : results) {
    auto [algorithm, c, rank] = key;
    if (bytes != results[{algorithm, c, 0}]) ++differing;
  }
  CHECK(differing == 0);
}

std::vector<Case> every_pair(std::initializer_list<std::size_t> counts) {
  std::vector<Case> cases;
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!comm::algorithms::supports(dtype, op)) continue;
      for (std::size_t count : counts) cases.push_back({dtype, op, count});
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("all_reduce: every algorithm x dtype x op x world size", "[collectives][all_reduce]") {
  int ranks = GENERATE(1, 2, 3, 4, 5, 7, 8);
  std::string transport = GENERATE("shm", "tcp");
  INFO(ranks << " ranks over " << transport);
  check_all_reduce(ranks, transport, every_pair({0, 1, 7, 1003}));
}

TEST_CASE("all_reduce: large counts, pipelined in many chunks", "[collectives][all_reduce][large]") {
  int ranks = GENERATE(2, 3, 5, 8);
  INFO(ranks << " ranks over shm");
  std::vector<Case> cases{{DType::Float32, ReduceOp::Sum, 1000003},
                          {DType::BFloat16, ReduceOp::Avg, 1000003},
                          {DType::Int64, ReduceOp::Max, 1000003},
                          {DType::Float32, ReduceOp::Sum, std::size_t{4} << 20},  // 16 MiB
                          // Messages of odd lengths first: the ring's shared-memory receives then
                          // combine bytes that sit misaligned in the stream, elements cut across records.
                          {DType::UInt8, ReduceOp::Max, 5},
                          {DType::Float64, ReduceOp::Sum, 300001},
                          {DType::Float16, ReduceOp::Sum, 99999},
                          {DType::Int32, ReduceOp::BXor, 200003},
                          // A whole shared-memory piece and a small remainder (reduced whole).
                          {DType::Float32, ReduceOp::Sum, 65536 + 100},
                          {DType::Float64, ReduceOp::Min, 32768 + 3}};
  check_all_reduce(ranks, "shm", cases);
}

TEST_CASE("all_reduce: a large buffer over TCP, in several rounds of the ring", "[collectives][all_reduce][large]") {
  // The ring takes at most 4 MiB per segment per round, through scratch over TCP.
  int ranks = GENERATE(2, 3);
  INFO(ranks << " ranks over tcp");
  std::vector<Case> cases{{DType::Float32, ReduceOp::Sum, (std::size_t{5} << 20) + 3},
                          {DType::Int64, ReduceOp::Max, (std::size_t{1} << 20) + 1},
                          {DType::BFloat16, ReduceOp::Avg, (std::size_t{6} << 20) + 7}};
  check_all_reduce(ranks, "tcp", cases);
}

TEST_CASE("all_reduce rejects bad input on the calling rank", "[collectives][all_reduce][bad-input]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> data(4, 1.0f);
    RANK_CHECK_THROWS(checks, group.all_reduce(data, ReduceOp::BAnd), "band", "float32");
    RANK_CHECK_THROWS(checks, group.all_reduce(comm::Buffer(nullptr, 3, DType::Float32)), "null pointer");
    RANK_CHECK_THROWS(checks, group.all_reduce(comm::Buffer(data.data(), 4, static_cast<DType>(-1))), "dtype (-1)");
    RANK_CHECK_THROWS(checks, group.all_reduce(data, ReduceOp::Sum, "direct"), "all_reduce has no direct",
                      "none to let the tuner choose");  // no enum to name: the public API takes names
    // Algorithms are named by strings: a misspelt one is refused with the names there are.
    RANK_CHECK_THROWS(checks, group.all_reduce(data, ReduceOp::Sum, "rnig"), "'rnig'", "recursive_doubling");
    RANK_CHECK_THROWS(checks, group.iall_reduce(data, ReduceOp::Sum, "Ring"), "'Ring'", "known algorithms");
    group.all_reduce(data);  // the group still works afterwards
    RANK_CHECK(checks, data[0] == 2.0f);
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("shared_memory needs every rank on one host over shm", "[collectives][all_reduce][bad-input]") {
  RankChecks checks;
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        RANK_CHECK(checks, !group.shared_memory_usable());
        std::vector<float> data(4, 1.0f);
        RANK_CHECK_THROWS(checks, group.all_reduce(data, ReduceOp::Sum, "shared_memory"), "shared_memory needs",
                          "one host");
        group.all_reduce(data);  // the tuner picks another algorithm, and the group still works
        RANK_CHECK(checks, data[0] == 2.0f);
      },
      std::chrono::seconds(60), "tcp");
  REQUIRE_RANK_CHECKS(checks);
}

// What the library reports it will run (ProcessGroup::algorithm_for, the benches' algo column)
// follows from the transport's capabilities: shared memory only where every peer shares the host.
TEST_CASE("algorithm_for reports the tuner's choice from the transport's capabilities", "[collectives][tuner]") {
  if (std::getenv("COMM_ALGO") != nullptr) SKIP("COMM_ALGO overrides the tuner");
  using comm::Collective;
  int ranks = GENERATE(2, 4);
  std::string transport = GENERATE("shm", "tcp");
  INFO(ranks << " ranks over " << transport);
  bool shm = transport == "shm";
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        RANK_CHECK(checks, group.shared_memory_usable() == shm);
        std::string_view small = group.algorithm_for(Collective::AllReduce, 8);
        std::string_view mid = group.algorithm_for(Collective::AllReduce, std::size_t{1} << 20);
        RANK_CHECK(checks, small == (shm ? "shared_memory" : "recursive_doubling"));
        RANK_CHECK(checks, mid == (!shm ? "ring" : ranks == 2 ? "ring" : "shared_memory"));
        RANK_CHECK(checks, std::string_view(group.algorithm_for(Collective::Barrier, 0)) ==
                               (shm ? "shared_memory" : "dissemination"));
        RANK_CHECK(checks, std::string_view(group.algorithm_for(Collective::Gather, 1024)) == "direct");
        RANK_CHECK(checks, std::string_view(group.algorithm_for(Collective::Broadcast, 8, "ring")) == "ring");
        RANK_CHECK_THROWS(checks, group.algorithm_for(Collective::AllReduce, 8, "direct"), "all_reduce has no direct");
        // The choice is what runs: the call succeeds and sums.
        std::vector<float> data(std::size_t{1} << 18, 1.0f);
        group.all_reduce(data);
        RANK_CHECK(checks, data.front() == static_cast<float>(ranks) && data.back() == static_cast<float>(ranks));
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}
