// all_gather_v, the uneven all_gather: random counts (zeros included) on 1 to 8 ranks over shared
// memory and TCP, out of place, in place, as an i-form and into one output per rank, every element checked against what its
// owner brought; bad counts are refused before anything moves (counts that differ between ranks:
// test_uneven_collectives.cpp).
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/thread_ranks.hpp"

using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

std::int64_t brought(int rank, int round, std::size_t i) {
  return static_cast<std::int64_t>(rank) * 1'000'000 + round * 10'000 + static_cast<std::int64_t>(i % 9973);
}

void gather_uneven(const std::string& transport, int ranks, unsigned seed) {
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        for (int round = 0; round < 4; ++round) {
          std::mt19937 random(seed + static_cast<unsigned>(round));  // the same counts on every rank
          std::vector<std::size_t> counts, at;
          std::size_t total = 0;
          for (int r = 0; r < ranks; ++r) {
            counts.push_back(random() % 4 == 0 ? 0 : random() % 5000);
            at.push_back(total);
            total += counts.back();
          }
          auto mine = static_cast<std::size_t>(me);
          std::vector<std::int64_t> input(counts[mine]), output(total, -1);
          for (std::size_t i = 0; i < counts[mine]; ++i) input[i] = brought(me, round, i);
          if (round == 0) {
            group.all_gather_v(output, input, counts);
          } else if (round == 1) {  // in place: this rank's block of the output is the input
            std::copy(input.begin(), input.end(), output.begin() + static_cast<std::ptrdiff_t>(at[mine]));
            group.all_gather_v(output, std::span<std::int64_t>(output.data() + at[mine], counts[mine]), counts);
          } else if (round == 2) {
            group.iall_gather_v(output, input, counts)->wait();
          } else {  // one output per rank, each rank's count its output's (as torch's all_gather)
            std::vector<comm::Buffer> blocks;
            for (int r = 0; r < ranks; ++r) blocks.emplace_back(output.data() + at[static_cast<std::size_t>(r)],
                                                                counts[static_cast<std::size_t>(r)], comm::DType::Int64);
            group.run({.operation = comm::Operation::AllGatherV, .input = input, .blocks = blocks});
          }
          bool right = true;
          for (int r = 0; r < ranks; ++r) {
            auto from = static_cast<std::size_t>(r);
            for (std::size_t i = 0; i < counts[from]; ++i) right = right && output[at[from] + i] == brought(r, round, i);
          }
          RANK_CHECK(checks, right);
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

}  // namespace

TEST_CASE("all_gather_v: random counts, 1 to 8 ranks, shm and tcp", "[all_gather_v]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      gather_uneven(transport, ranks, 7u * static_cast<unsigned>(ranks) + (transport[0] == 's' ? 1u : 2u));
    }
  }
}

TEST_CASE("all_gather_v: bad counts are refused before anything moves", "[all_gather_v]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> input(4), output(8);
    std::vector<std::size_t> three{1, 1, 1}, too_many{4, 5}, more_than_input{4, 4};
    RANK_CHECK_THROWS(checks, group.all_gather_v(output, input, three), "counts has 3 counts", "one per rank, 2");
    RANK_CHECK_THROWS(checks, group.all_gather_v(output, input, too_many), "counts add up to more");
    std::vector<float> small(3);
    RANK_CHECK_THROWS(checks, group.all_gather_v(output, small, more_than_input), "fewer than this rank's count");
    group.all_gather_v(output, input, more_than_input);  // still usable: nothing was sent
  });
  REQUIRE_RANK_CHECKS(checks);
}
