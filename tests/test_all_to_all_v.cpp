// all_to_all_v, the uneven all_to_all: random counts (zeros included) on 1 to 8 ranks over
// shared memory and TCP, out of place and in place, blocking and i-form, every element checked
// against the value its sender wrote; counts that disagree between a pair of ranks fail as a
// mismatch on every rank; bad counts are refused before anything moves.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/thread_ranks.hpp"

using comm::Buffer;
using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

// What rank `from` sends rank `to` at element i of their block in round `round`.
std::int64_t sent_value(int from, int to, int round, std::size_t i) {
  return static_cast<std::int64_t>(from) * 1'000'000 + to * 10'000 + round * 1000 + static_cast<std::int64_t>(i % 997);
}

// counts[from][to]: the same on every rank (drawn from one seed), a quarter of them zero.
// `largest`: elements a block has at most.
std::vector<std::vector<std::size_t>> draw_counts(int ranks, unsigned seed, std::size_t largest) {
  std::mt19937 random(seed);
  std::vector<std::vector<std::size_t>> counts(static_cast<std::size_t>(ranks));
  for (auto& row : counts) {
    for (int to = 0; to < ranks; ++to) row.push_back(random() % 4 == 0 ? 0 : random() % largest);
  }
  return counts;
}

// `algorithm`: empty, the public methods (the tuner's choice); else a Call naming it.
void exchange(const std::string& transport, int ranks, unsigned seed, const std::string& algorithm = {},
              std::size_t largest = 3000) {
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        auto n = static_cast<std::size_t>(ranks);
        for (int round = 0; round < 3; ++round) {
          auto counts = draw_counts(ranks, seed + static_cast<unsigned>(round), largest);
          std::vector<std::size_t> input_counts = counts[static_cast<std::size_t>(me)], output_counts;
          for (std::size_t from = 0; from < n; ++from) output_counts.push_back(counts[from][static_cast<std::size_t>(me)]);
          std::size_t sent = 0, received = 0;
          for (std::size_t r = 0; r < n; ++r) sent += input_counts[r], received += output_counts[r];
          bool in_place = round == 1;
          bool started = round == 2;
          std::vector<std::int64_t> input(std::max(sent, in_place ? received : 0)), output(received, -1);
          std::size_t at = 0;
          for (std::size_t to = 0; to < n; ++to) {
            for (std::size_t i = 0; i < input_counts[to]; ++i) input[at + i] = sent_value(me, static_cast<int>(to), round, i);
            at += input_counts[to];
          }
          std::vector<std::int64_t>& result = in_place ? input : output;
          comm::Call named{.operation = comm::Operation::AllToAllV,
                           .output = in_place ? comm::Buffer(input) : comm::Buffer(output),
                           .input = input,
                           .input_counts = input_counts,
                           .output_counts = output_counts,
                           .algorithm = algorithm};
          if (!algorithm.empty()) {
            if (started) group.start(named)->wait();
            if (!started) group.run(named);
          } else if (started) {
            group.iall_to_all_v(output, output_counts, input, input_counts)->wait();
          } else if (in_place) {
            group.all_to_all_v(input, output_counts, input, input_counts);
          } else {
            group.all_to_all_v(output, output_counts, input, input_counts);
          }
          bool right = true;
          at = 0;
          for (std::size_t from = 0; from < n; ++from) {
            for (std::size_t i = 0; i < output_counts[from]; ++i)
              right = right && result[at + i] == sent_value(static_cast<int>(from), me, round, i);
            at += output_counts[from];
          }
          RANK_CHECK(checks, right);
          if (!in_place) RANK_CHECK(checks, std::equal(output.begin() + static_cast<std::ptrdiff_t>(at), output.end(),
                                                       std::vector<std::int64_t>(output.size() - at, -1).begin()));
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

}  // namespace

TEST_CASE("all_to_all_v: random counts, 1 to 8 ranks, shm and tcp", "[all_to_all_v]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      exchange(transport, ranks, 100u * static_cast<unsigned>(ranks) + (transport[0] == 's' ? 1u : 2u));
    }
  }
}

// Blocks up to 2.4 MB: over shared memory most are read from the sender's memory in one copy
// (transport/lent_buffers.hpp), the largest go through the ring; over TCP all are streamed.
TEST_CASE("all_to_all_v: large random blocks, 2 to 4 ranks, shm and tcp", "[all_to_all_v]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 2; ranks <= 4; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      exchange(transport, ranks, 500u * static_cast<unsigned>(ranks) + (transport[0] == 's' ? 1u : 2u), {}, 300'000);
    }
  }
}

TEST_CASE("all_to_all_v by Bruck's algorithm: random counts, 1 to 8 ranks, shm and tcp", "[all_to_all_v]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      exchange(transport, ranks, 300u * static_cast<unsigned>(ranks) + (transport[0] == 's' ? 1u : 2u), "bruck");
    }
  }
}

TEST_CASE("all_to_all_v: counts two ranks disagree on fail the call on every rank", "[all_to_all_v]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (std::string algorithm : {"direct", "bruck"}) {
      INFO(transport << ", " << algorithm);
      RankChecks checks;
      run_ranks(
          3,
          [&](comm::ProcessGroup& group) {
            // Rank 1 expects 5 elements from rank 0, which sends it 4.
            std::vector<std::size_t> input_counts(3, 4), output_counts(3, 4);
            if (group.rank() == 1) output_counts[0] = 5;
            std::vector<float> input(12, 1.0f), output(13, 0.0f);
            try {
              group.run({.operation = comm::Operation::AllToAllV,
                         .output = output,
                         .input = input,
                         .input_counts = input_counts,
                         .output_counts = output_counts,
                         .algorithm = algorithm});
              checks.check(false, "the call failed", __LINE__);
            } catch (const comm::Error& error) {
              // Rank 1 sees the disagreement; the others fail in the call's confirmation, with its text.
              std::string text = error.what();
              checks.check(error.code() == comm::ErrorCode::Mismatch, "a mismatch", __LINE__, text);
              checks.check(text.find("rank 0 sent rank 1 4 elements, where rank 1 expected 5") != std::string::npos,
                           "names the pair", __LINE__, text);
            }
          },
          std::chrono::seconds(20), transport);
      REQUIRE_RANK_CHECKS(checks);
    }
  }
}

TEST_CASE("all_to_all_v: bad counts are refused before anything moves", "[all_to_all_v]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> input(8), output(8);
    std::vector<std::size_t> two(2, 4), three(3, 1), too_many{4, 5};
    RANK_CHECK_THROWS(checks, group.all_to_all_v(output, two, input, three), "input_counts has 3 counts",
                      "one per rank, 2");
    RANK_CHECK_THROWS(checks, group.all_to_all_v(output, too_many, input, two), "output_counts add up to more");
    std::vector<std::size_t> huge{SIZE_MAX, 2};
    RANK_CHECK_THROWS(checks, group.all_to_all_v(output, two, input, huge), "input_counts add up to more");
    // The group is still usable: nothing was sent.
    group.all_to_all_v(output, two, input, two);
  });
  REQUIRE_RANK_CHECKS(checks);
}
