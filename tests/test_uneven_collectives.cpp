// reduce_scatter_v, gather_v and scatter_v, the uneven forms of reduce_scatter, gather and
// scatter: random counts (zeros included) on 1 to 8 ranks over shared memory and TCP, out of
// place, in place and as i-forms, every element checked against a reference computed here (in
// float64 for the floating-point average); counts that differ between ranks fail as a mismatch
// on every rank; bad counts are refused before anything moves.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/thread_ranks.hpp"

using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

// The same random counts on every rank (one seed), zeros included, and their offsets.
struct Counts {
  std::vector<std::size_t> counts, at;
  std::size_t total = 0;

  Counts(int ranks, unsigned seed) {
    std::mt19937 random(seed);
    for (int r = 0; r < ranks; ++r) {
      counts.push_back(random() % 4 == 0 ? 0 : random() % 3000);
      at.push_back(total);
      total += counts.back();
    }
  }
  std::size_t of(int rank) const { return counts[static_cast<std::size_t>(rank)]; }
  std::size_t start(int rank) const { return at[static_cast<std::size_t>(rank)]; }
};

// Element i of the block for rank `to` in rank `from`'s data.
std::int64_t value(int from, int to, int round, std::size_t i) {
  return static_cast<std::int64_t>(from) * 1'000'000 + to * 10'000 + round * 1'000 +
         static_cast<std::int64_t>(i % 997);
}

void reduce_scatter_uneven(const std::string& transport, int ranks, unsigned seed) {
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        for (int round = 0; round < 3; ++round) {
          Counts c(ranks, seed + static_cast<unsigned>(round));
          std::size_t mine = c.of(me);
          bool right = true;
          if (round < 2) {  // int64: exact
            std::vector<std::int64_t> input(c.total), output(mine, -1);
            for (int to = 0; to < ranks; ++to)
              for (std::size_t i = 0; i < c.of(to); ++i) input[c.start(to) + i] = value(me, to, round, i);
            std::int64_t* result = output.data();
            if (round == 0) {
              group.reduce_scatter_v(output, input, c.counts, comm::ReduceOp::Sum);
            } else {  // in place, Max: this rank's block of the input is the output
              result = input.data() + c.start(me);
              group.reduce_scatter_v(std::span<std::int64_t>(result, mine), input, c.counts, comm::ReduceOp::Max);
            }
            for (std::size_t i = 0; i < mine; ++i) {
              std::int64_t want = round == 0 ? 0 : value(0, me, round, i);
              for (int from = 0; from < ranks; ++from)
                want = round == 0 ? want + value(from, me, round, i) : std::max(want, value(from, me, round, i));
              right = right && result[i] == want;
            }
          } else {  // float32 average as an i-form, against a float64 reference
            std::vector<float> input(c.total), output(mine, -1.0f);
            for (int to = 0; to < ranks; ++to)
              for (std::size_t i = 0; i < c.of(to); ++i)
                input[c.start(to) + i] = static_cast<float>(value(me, to, round, i)) / 7.0f;
            group.ireduce_scatter_v(output, input, c.counts, comm::ReduceOp::Avg)->wait();
            for (std::size_t i = 0; i < mine; ++i) {
              double sum = 0;
              for (int from = 0; from < ranks; ++from)
                sum += static_cast<double>(static_cast<float>(value(from, me, round, i)) / 7.0f);
              double want = sum / ranks;
              right = right && std::abs(output[i] - want) <= 1e-5 * std::abs(want) + 1e-6;
            }
          }
          RANK_CHECK(checks, right);
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

void gather_and_scatter_uneven(const std::string& transport, int ranks, unsigned seed) {
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        for (int round = 0; round < 3; ++round) {
          Counts c(ranks, seed + static_cast<unsigned>(round));
          int root = static_cast<int>((seed + static_cast<unsigned>(round)) % static_cast<unsigned>(ranks));
          std::size_t mine = c.of(me);
          bool is_root = me == root;
          // gather_v: rank r brings value(r, root, ...); round 1 gathers in place on the root.
          std::vector<std::int64_t> own(mine), gathered(is_root ? c.total : 0, -1);
          for (std::size_t i = 0; i < mine; ++i) own[i] = value(me, root, round, i);
          if (round == 1 && is_root) {
            std::copy(own.begin(), own.end(), gathered.begin() + static_cast<std::ptrdiff_t>(c.start(me)));
            group.gather_v(gathered, std::span<std::int64_t>(gathered.data() + c.start(me), mine), c.counts, root);
          } else if (round == 2) {
            group.igather_v(gathered, own, c.counts, root)->wait();
          } else {
            group.gather_v(gathered, own, c.counts, root);
          }
          bool right = true;
          for (int from = 0; is_root && from < ranks; ++from)
            for (std::size_t i = 0; i < c.of(from); ++i)
              right = right && gathered[c.start(from) + i] == value(from, root, round, i);
          RANK_CHECK(checks, right);

          // scatter_v: block r of the root's input holds value(root, r, ...); round 1 in place on the root.
          std::vector<std::int64_t> blocks(is_root ? c.total : 0), received(mine, -1);
          for (int to = 0; is_root && to < ranks; ++to)
            for (std::size_t i = 0; i < c.of(to); ++i) blocks[c.start(to) + i] = value(root, to, round, i);
          const std::int64_t* result = received.data();
          if (round == 1 && is_root) {
            result = blocks.data() + c.start(me);
            group.scatter_v(std::span<std::int64_t>(blocks.data() + c.start(me), mine), blocks, c.counts, root);
          } else if (round == 2) {
            group.iscatter_v(received, blocks, c.counts, root)->wait();
          } else {
            group.scatter_v(received, blocks, c.counts, root);
          }
          right = true;
          for (std::size_t i = 0; i < mine; ++i) right = right && result[i] == value(root, me, round, i);
          RANK_CHECK(checks, right);
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

unsigned seed_of(const char* transport, int ranks) {
  return 11u * static_cast<unsigned>(ranks) + (transport[0] == 's' ? 3u : 5u);
}

}  // namespace

TEST_CASE("reduce_scatter_v: random counts, 1 to 8 ranks, shm and tcp", "[uneven]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      reduce_scatter_uneven(transport, ranks, seed_of(transport, ranks));
    }
  }
}

TEST_CASE("gather_v and scatter_v: random counts and roots, 1 to 8 ranks, shm and tcp", "[uneven]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      gather_and_scatter_uneven(transport, ranks, seed_of(transport, ranks));
    }
  }
}

TEST_CASE("every v-form with shared counts: counts that differ between ranks fail on every rank", "[uneven]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int which = 0; which < 4; ++which) {
      INFO(transport << ", call " << which);
      RankChecks checks;
      run_ranks(
          3,
          [&](comm::ProcessGroup& group) {
            std::vector<std::size_t> counts{3, 4, 5};
            if (group.rank() == 2) counts = {3, 5, 4};  // the same total, other blocks
            std::vector<float> input(12, 1.0f), output(12, 0.0f);
            try {
              if (which == 0) group.reduce_scatter_v(output, input, counts);
              if (which == 1) group.gather_v(output, input, counts, 0);
              if (which == 2) group.scatter_v(output, input, counts, 1);
              if (which == 3) group.all_gather_v(output, std::span<float>(input.data(), 5), counts);
              checks.check(false, "the call failed", __LINE__);
            } catch (const comm::Error& error) {
              checks.check(error.code() == comm::ErrorCode::Mismatch, "a mismatch", __LINE__, error.what());
            }
          },
          std::chrono::seconds(20), transport);
      REQUIRE_RANK_CHECKS(checks);
    }
  }
}

TEST_CASE("reduce_scatter_v, gather_v, scatter_v: bad counts are refused before anything moves", "[uneven]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> small(3), four(4), eight(8);
    std::vector<std::size_t> three{1, 1, 1}, too_many{4, 5}, fours{4, 4};
    RANK_CHECK_THROWS(checks, group.reduce_scatter_v(four, eight, three), "counts has 3 counts", "one per rank, 2");
    RANK_CHECK_THROWS(checks, group.reduce_scatter_v(four, eight, too_many), "counts add up to more");
    RANK_CHECK_THROWS(checks, group.reduce_scatter_v(small, eight, fours), "the output holds 3 elements");
    std::vector<std::int32_t> integers(8);
    RANK_CHECK_THROWS(checks, group.reduce_scatter_v(four, integers, fours), "same dtype");
    RANK_CHECK_THROWS(checks, group.gather_v(eight, small, fours, 0), "the input holds 3 elements");
    RANK_CHECK_THROWS(checks, group.gather_v(eight, four, fours, 2), "root 2 is not a rank");
    RANK_CHECK_THROWS(checks, group.scatter_v(small, eight, fours, 1), "the output holds 3 elements");
    if (group.rank() == 0) RANK_CHECK_THROWS(checks, group.gather_v(four, four, fours, 0), "counts add up to more");
    // Still usable: nothing was sent.
    group.reduce_scatter_v(four, eight, fours);
    group.gather_v(eight, four, fours, 1);
    group.scatter_v(four, eight, fours, 0);
  });
  REQUIRE_RANK_CHECKS(checks);
}
