// Persistent calls (ProcessGroup::prepare, comm/prepared_call.hpp): a collective prepared once
// and run many times gives what the ordinary call gives, run after run, with new contents in
// the same buffers; runs and ordinary calls interleave in one numbering (a prepared run on one
// rank meets the ordinary call on another); started runs complete in order; the mismatch check,
// revocation and a destroyed group still answer with errors.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/thread_ranks.hpp"

using comm::Buffer;
using comm::Call;
using comm::Operation;
using comm::ReduceOp;
using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

// What rank r holds at element i in run `run` (exact in double and int64 alike).
std::int64_t value(int rank, int run, std::size_t index) {
  return static_cast<std::int64_t>((rank + 1) * 1000 + run * 17 + static_cast<int>(index % 97)) - 500;
}

// Every rank's input reduced, computed here in int64 (the reference).
std::int64_t reduced(ReduceOp op, int ranks, int run, std::size_t index) {
  std::int64_t result = value(0, run, index);
  for (int rank = 1; rank < ranks; ++rank) {
    std::int64_t next = value(rank, run, index);
    switch (op) {
      case ReduceOp::Sum: result += next; break;
      case ReduceOp::Max: result = std::max(result, next); break;
      case ReduceOp::Min: result = std::min(result, next); break;
      default: FAIL("op not in this test");
    }
  }
  return result;
}

void prepared_collectives(const std::string& transport, int ranks, unsigned seed) {
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        std::mt19937 random(seed);  // the same draws on every rank: the calls match
        const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
        std::size_t count = 1 + random() % 3000;
        ReduceOp op = ops[random() % 3];
        auto n = static_cast<std::size_t>(ranks);

        std::vector<double> reduce_buffer(count);
        auto all_reduce = group.prepare({.operation = Operation::AllReduce, .output = reduce_buffer, .op = op});
        std::vector<std::int64_t> gathered(count * n), gather_input(count);
        auto all_gather =
            group.prepare({.operation = Operation::AllGather, .output = gathered, .input = gather_input});
        std::vector<std::int64_t> scatter_input(count * n), scattered(count);
        auto reduce_scatter = group.prepare(
            {.operation = Operation::ReduceScatter, .output = scattered, .input = scatter_input, .op = op});
        int root = static_cast<int>(random() % n);
        std::vector<std::int32_t> broadcast_buffer(count);
        auto broadcast =
            group.prepare({.operation = Operation::Broadcast, .output = broadcast_buffer, .root = root});
        std::vector<std::int64_t> to_all(count * n), from_all(count * n);
        auto all_to_all = group.prepare({.operation = Operation::AllToAll, .output = from_all, .input = to_all});
        auto barrier = group.prepare({.operation = Operation::Barrier});

        for (int run = 0; run < 6; ++run) {
          for (std::size_t i = 0; i < count; ++i) reduce_buffer[i] = static_cast<double>(value(me, run, i));
          // Every other run, rank 0 makes the ordinary call instead: one numbering, one match.
          if (me == 0 && run % 2 == 1) {
            group.all_reduce(reduce_buffer, op);
          } else {
            all_reduce->run();
          }
          bool right = true;
          for (std::size_t i = 0; i < count; ++i)
            right = right && reduce_buffer[i] == static_cast<double>(reduced(op, ranks, run, i));
          RANK_CHECK(checks, right);

          for (std::size_t i = 0; i < count; ++i) gather_input[i] = value(me, run, i);
          all_gather->run();
          right = true;
          for (std::size_t r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i)
              right = right && gathered[r * count + i] == value(static_cast<int>(r), run, i);
          RANK_CHECK(checks, right);

          for (std::size_t r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i) scatter_input[r * count + i] = value(me, run, r * count + i);
          reduce_scatter->run();
          right = true;
          for (std::size_t i = 0; i < count; ++i)
            right = right && scattered[i] == reduced(op, ranks, run, static_cast<std::size_t>(me) * count + i);
          RANK_CHECK(checks, right);

          for (std::size_t i = 0; i < count; ++i)
            broadcast_buffer[i] = static_cast<std::int32_t>(me == root ? value(me, run, i) : -1);
          broadcast->run();
          right = true;
          for (std::size_t i = 0; i < count; ++i) right = right && broadcast_buffer[i] == value(root, run, i);
          RANK_CHECK(checks, right);

          // Block r of my input goes to rank r: value(me, run, r * count + i).
          for (std::size_t r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i) to_all[r * count + i] = value(me, run, r * count + i);
          all_to_all->run();
          right = true;
          for (std::size_t r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i)
              right = right && from_all[r * count + i] ==
                                   value(static_cast<int>(r), run, static_cast<std::size_t>(me) * count + i);
          RANK_CHECK(checks, right);
          barrier->run();
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

}  // namespace

TEST_CASE("prepared collectives give the ordinary call's results, run after run", "[prepared]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int ranks = 1; ranks <= 4; ++ranks) {
      INFO(transport << ", " << ranks << " ranks");
      prepared_collectives(transport, ranks, 1234u + static_cast<unsigned>(ranks));
    }
  }
}

TEST_CASE("started runs complete in order and interleave with ordinary calls", "[prepared]") {
  RankChecks checks;
  run_ranks(3, [&](comm::ProcessGroup& group) {
    int me = group.rank();
    std::vector<std::int64_t> data(100);
    auto all_reduce = group.prepare({.operation = Operation::AllReduce, .output = data});
    for (auto& x : data) x = me + 1;
    // Three runs on the same buffer, queued before any completes: 6, then 18, then 54.
    std::vector<std::shared_ptr<comm::Work>> works;
    for (int run = 0; run < 3; ++run) works.push_back(all_reduce->start());
    std::vector<std::int64_t> other(10, me);
    works.push_back(group.iall_reduce(other));  // an ordinary i-form after them
    for (auto& work : works) work->wait();
    RANK_CHECK(checks, data[0] == 54 && data[99] == 54);
    RANK_CHECK(checks, other[0] == 0 + 1 + 2);
    // A prepared transfer: a ring of sends and receives, run again with new contents.
    std::vector<int> out(4), in(4, -1);
    int next = (me + 1) % 3, previous = (me + 2) % 3;
    auto send = group.prepare({.operation = Operation::Send, .input = out, .root = next, .tag = 7});
    auto recv = group.prepare({.operation = Operation::Recv, .output = in, .root = previous, .tag = 7});
    for (int run = 0; run < 3; ++run) {
      for (auto& x : out) x = me * 10 + run;
      auto receiving = recv->start();
      send->run();
      receiving->wait();
      RANK_CHECK(checks, in[0] == previous * 10 + run && in[3] == previous * 10 + run);
    }
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("prepared calls: bad arguments at prepare, a mismatch, revocation and a gone group are errors",
          "[prepared]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& world) {
    std::vector<float> values(8, 1.0f);
    // Checked when prepared, on this rank alone.
    RANK_CHECK_THROWS(checks, world.prepare({.operation = Operation::Broadcast, .output = values, .root = 5}),
                      "root");
    RANK_CHECK_THROWS(checks,
                      world.prepare({.operation = Operation::AllReduce, .output = values, .algorithm = "no_such"}),
                      "no_such");
    // A run on a group that was revoked fails with the reason.
    auto group = world.new_group({0, 1});
    auto all_reduce = group->prepare({.operation = Operation::AllReduce, .output = values});
    all_reduce->run();
    RANK_CHECK(checks, values[0] == 2.0f);
    world.barrier();
    if (world.rank() == 0) group->revoke("a test revokes the group");
    world.barrier();
    RANK_CHECK_THROWS(checks, all_reduce->run(), "a test revokes the group");
    // A run after its group is destroyed.
    group.reset();
    RANK_CHECK_THROWS(checks, all_reduce->run(), "destroyed");
  });
  REQUIRE_RANK_CHECKS(checks);

  // Ranks whose runs differ (8 elements against 9) fail in the call, on both ranks.
  RankChecks mismatch;
  run_ranks(2, [&](comm::ProcessGroup& world) {
    std::vector<float> values(world.rank() == 0 ? 8 : 9, 1.0f);
    auto all_reduce = world.prepare({.operation = Operation::AllReduce, .output = values});
    RANK_CHECK_THROWS(mismatch, all_reduce->run(), "mismatch");
  });
  REQUIRE_RANK_CHECKS(mismatch);
}
