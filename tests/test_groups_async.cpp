// Groups (new_group) and the i-forms: group-local ranks, groups in use at once without
// cross-talk, a group of one, non-members refused; asynchronous collectives complete in issue
// order and independent groups progress concurrently.
#include <catch2/catch_test_macros.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <thread>

#include "algorithms/algorithm_table.hpp"
#include "libcomm/base/collective_traits.hpp"
#include "tests/support/thread_ranks.hpp"

using comm::Buffer;
using comm::DType;
using comm::ReduceOp;
using comm::testing::RankChecks;
using comm::testing::run_ranks;

TEST_CASE("new_group: group-local ranks, disjoint groups at once, no cross-talk", "[groups]") {
  RankChecks checks;
  run_ranks(4, [&](comm::ProcessGroup& world) {
    int me = world.rank();
    auto low = world.new_group({0, 1});
    auto high = world.new_group({3, 2});  // listed order numbers the group: world 3 is rank 0
    auto& mine = me < 2 ? *low : *high;
    auto& other = me < 2 ? *high : *low;
    RANK_CHECK(checks, mine.size() == 2);
    RANK_CHECK(checks, other.rank() == -1);
    int expected_rank = me < 2 ? me : 3 - me;
    RANK_CHECK(checks, mine.rank() == expected_rank);
    // Both groups reduce at the same time with the same sequence numbers and different data.
    for (int round = 0; round < 50; ++round) {
      std::vector<std::int64_t> data(1000, me + 1 + round);
      mine.all_reduce(data);
      std::int64_t want = me < 2 ? (1 + 2 + 2 * round) : (3 + 4 + 2 * round);
      RANK_CHECK(checks, data[0] == want && data[999] == want);
    }
    // Point to point with group ranks and a tag also used by the world group.
    std::vector<int> message{me, 42};
    std::vector<int> world_message{100 + me};
    if (mine.rank() == 0) {
      world.send(world_message, (me + 1) % 4, 5);  // same tag, other group
      mine.send(message, 1, 5);
    } else {
      std::vector<int> received(2, -1);
      int source = mine.recv(received, 0, 5);
      RANK_CHECK(checks, source == 0);
      RANK_CHECK(checks, received[0] == (me < 2 ? 0 : 3) && received[1] == 42);
    }
    if (me == 1 || me == 0) {  // the world messages, from world 0 to 1 and from world 3 to 0
      std::vector<int> received(1, -1);
      world.recv(received, me == 1 ? 0 : 3, 5);
      RANK_CHECK(checks, received[0] == 100 + (me == 1 ? 0 : 3));
    }
    // A non-member using the group gets a clear error.
    std::vector<float> values(3, 1.0f);
    RANK_CHECK_THROWS(checks, other.all_reduce(values), "not a member");
    RANK_CHECK_THROWS(checks, other.send(values, 0), "not a member");
    // A group of one: collectives are copies or no-ops.
    auto alone = world.new_group({me == 0 ? 0 : 0});
    if (me == 0) {
      RANK_CHECK(checks, alone->size() == 1 && alone->rank() == 0);
      alone->all_reduce(values, ReduceOp::Avg);
      alone->barrier();
      RANK_CHECK(checks, values[0] == 1.0f);
    }
    // A subgroup of a subgroup.
    auto sub = mine.new_group({1});
    if (mine.rank() == 1) {
      sub->broadcast(values, 0);
      RANK_CHECK(checks, sub->rank() == 0);
    }
    world.barrier();
  });
  REQUIRE_RANK_CHECKS(checks);
}

// torch.distributed calls a backend's group creator on the group's members only (issue 16).
TEST_CASE("new_group by key: only members call it, and it shares the world's connections", "[groups]") {
  RankChecks checks;
  run_ranks(4, [&](comm::ProcessGroup& world) {
    int me = world.rank();
    // Ranks 0 and 2 make "evens"; 1 and 3 make "odds" and then "odd pair again" (a second group
    // of the same ranks); nobody else calls either.
    std::shared_ptr<comm::ProcessGroup> mine =
        me % 2 == 0 ? world.new_group({2, 0}, "evens") : world.new_group({1, 3}, "odds");
    RANK_CHECK(checks, mine->size() == 2);
    RANK_CHECK(checks, mine->rank() == (me == 2 ? 0 : me == 0 ? 1 : me == 1 ? 0 : 1));
    for (int round = 0; round < 20; ++round) {
      std::vector<std::int64_t> data(100, me + round);
      mine->all_reduce(data);
      std::int64_t want = me % 2 == 0 ? (0 + 2 + 2 * round) : (1 + 3 + 2 * round);
      RANK_CHECK(checks, data[0] == want && data[99] == want);
    }
    if (me % 2 == 1) {
      auto again = world.new_group({3, 1}, "odd pair again");
      std::vector<float> one(1, 1.0f);
      again->all_reduce(one);
      RANK_CHECK(checks, one[0] == 2.0f);
    }
    // The world still works, and a counted new_group after keyed ones agrees everywhere.
    world.barrier();
    auto all = world.new_group({0, 1, 2, 3});
    std::vector<int> value(1, 1);
    all->all_reduce(value);
    RANK_CHECK(checks, value[0] == 4);
    // A rank that is not in the list may not make it; a key is needed; the same key twice is refused.
    bool refused = false;
    try {
      world.new_group({(me + 1) % 4}, "not mine");
    } catch (const comm::InvalidArgumentError& error) {
      refused = std::string(error.what()).find("members only") != std::string::npos;
    }
    RANK_CHECK(checks, refused);
    refused = false;
    try {
      world.new_group({me}, me % 2 == 0 ? "evens" : "odds");
    } catch (const comm::InvalidArgumentError& error) {
      refused = std::string(error.what()).find("use another key") != std::string::npos;
    }
    RANK_CHECK(checks, refused);
  });
  REQUIRE_RANK_CHECKS(checks);
}

// torch.distributed's new_group(timeout=...): calls on the new group wait that long for their
// peers, not the world's 60 s; the world's timeout is untouched.
TEST_CASE("new_group takes its own timeout", "[groups]") {
  RankChecks checks;
  std::atomic<bool> timed_out{false};
  run_ranks(2, [&](comm::ProcessGroup& world) {
    auto quick = world.new_group({0, 1}, "quick", std::chrono::milliseconds(300));
    RANK_CHECK(checks, quick->timeout() == std::chrono::milliseconds(300));
    RANK_CHECK(checks, world.timeout() == std::chrono::seconds(60));
    if (world.rank() == 0) {
      // Rank 1 never joins this barrier.
      auto started = std::chrono::steady_clock::now();
      bool timeout_error = false;
      try {
        quick->barrier();
      } catch (const comm::TimeoutError&) {
        timeout_error = true;
      }
      auto waited = std::chrono::steady_clock::now() - started;
      RANK_CHECK(checks, timeout_error);
      RANK_CHECK(checks, waited >= std::chrono::milliseconds(250) && waited < std::chrono::seconds(5));
      timed_out = true;
    } else {
      while (!timed_out) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    RANK_CHECK_THROWS(checks, world.new_group({0, 1}, "never", std::chrono::milliseconds(0)), "must be positive");
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("new_group rejects bad rank lists", "[groups][bad-input]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& world) {
    RANK_CHECK_THROWS(checks, world.new_group({0, 2}), "rank 2 is not in this group");
    RANK_CHECK_THROWS(checks, world.new_group({1, 1}), "listed twice");
    RANK_CHECK_THROWS(checks, world.new_group({}), "empty");
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("i-forms complete in issue order, and independent groups progress concurrently", "[async]") {
  RankChecks checks;
  run_ranks(3, [&](comm::ProcessGroup& world) {
    int me = world.rank();
    constexpr int kCalls = 20;
    std::vector<std::vector<float>> buffers(kCalls, std::vector<float>(10000));
    std::vector<std::shared_ptr<comm::Work>> works;
    for (int i = 0; i < kCalls; ++i) {
      std::fill(buffers[i].begin(), buffers[i].end(), static_cast<float>(i + me));
      works.push_back(i % 2 == 0 ? world.iall_reduce(buffers[i]) : world.ibroadcast(buffers[i], i % 3));
    }
    std::vector<float> blocking(5, 1.0f);
    world.all_reduce(blocking);  // queued behind the i-calls: runs after them
    RANK_CHECK(checks, blocking[0] == 3.0f);
    for (int i = kCalls - 1; i >= 0; --i) {
      works[static_cast<std::size_t>(i)]->wait();
      // Everything issued before a completed call has completed too.
      for (int j = 0; j < i; ++j) RANK_CHECK(checks, works[static_cast<std::size_t>(j)]->is_completed());
      float want = i % 2 == 0 ? static_cast<float>(3 * i + 3) : static_cast<float>(i + i % 3);
      RANK_CHECK(checks,
                 buffers[static_cast<std::size_t>(i)][0] == want && buffers[static_cast<std::size_t>(i)][9999] == want);
    }
    // Two groups over the same ranks: waiting on the second first must not deadlock.
    auto first = world.new_group({0, 1, 2});
    auto second = world.new_group({2, 1, 0});
    std::vector<std::int32_t> a(100, 1), b(100, 2);
    auto work_a = first->iall_reduce(a);
    auto work_b = second->iall_reduce(b);
    work_b->wait();
    work_a->wait();
    RANK_CHECK(checks, a[0] == 3 && b[99] == 6);
    auto barrier = world.ibarrier();
    barrier->wait();
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("blocking calls and i-forms hand the group over to each other thousands of times", "[async]") {
  // The inline path claims the group without a lock (collective_queue.cpp): an i-call issued
  // just before a blocking one, or while one runs, must run in issue order and never wait for
  // a wake-up that nobody sends (a hang here ends in the test's timeout).
  RankChecks checks;
  run_ranks(3, [&](comm::ProcessGroup& world) {
    int me = world.rank();
    constexpr int kRounds = 1500;
    std::vector<std::int64_t> queued(kRounds), inline_values(kRounds);
    std::vector<std::shared_ptr<comm::Work>> works;
    works.reserve(kRounds);
    for (int round = 0; round < kRounds; ++round) {
      queued[static_cast<std::size_t>(round)] = round + me;
      works.push_back(world.iall_reduce(Buffer(&queued[static_cast<std::size_t>(round)], 1, DType::Int64)));
      inline_values[static_cast<std::size_t>(round)] = round * me;
      if (round % 3 == 0) works.back()->wait();  // sometimes the queue is empty again first
      world.all_reduce(Buffer(&inline_values[static_cast<std::size_t>(round)], 1, DType::Int64));
      // The blocking call ran after the i-call issued before it.
      RANK_CHECK(checks, works.back()->is_completed());
    }
    for (int round = 0; round < kRounds; ++round) {
      works[static_cast<std::size_t>(round)]->wait();
      RANK_CHECK(checks, queued[static_cast<std::size_t>(round)] == 3 * round + 3);
      RANK_CHECK(checks, inline_values[static_cast<std::size_t>(round)] == 3 * round);
    }
  });
  REQUIRE_RANK_CHECKS(checks);
}

// The value every form comes down to: Calls started and run, mixed with the methods, in one order.
TEST_CASE("a Call started or run is the collective or transfer it describes", "[async]") {
  RankChecks checks;
  run_ranks(3, [&](comm::ProcessGroup& world) {
    int me = world.rank(), n = world.size();
    std::vector<double> summed(7, me + 1.0);
    auto work = world.start({.operation = comm::Operation::AllReduce, .output = summed});
    std::vector<std::int64_t> gathered(3 * 2, -1), mine{me * 10, me * 10 + 1};
    world.run({.operation = comm::Operation::AllGather, .output = gathered, .input = mine});
    work->wait();
    RANK_CHECK(checks, summed[0] == 6.0 && summed[6] == 6.0);  // 1 + 2 + 3
    for (int r = 0; r < n; ++r) RANK_CHECK(checks, gathered[2 * r] == r * 10 && gathered[2 * r + 1] == r * 10 + 1);
    // Point to point, with the source of an any-source receive coming back from run.
    std::vector<float> message(4, static_cast<float>(me));
    if (me != 0) {
      world.run({.operation = comm::Operation::Send, .input = message, .root = 0, .tag = 5});
    } else {
      int sum_of_sources = 0;
      for (int i = 1; i < n; ++i) {
        std::vector<float> into(4, -1.0f);
        int source =
            world.run({.operation = comm::Operation::Recv, .output = into, .root = comm::kAnySource, .tag = 5});
        RANK_CHECK(checks, into[3] == static_cast<float>(source));
        sum_of_sources += source;
      }
      RANK_CHECK(checks, sum_of_sources == 3);
    }
    // A bad Call is refused on the calling rank like a bad method call.
    std::vector<float> small(1);
    std::vector<float> big(5);
    RANK_CHECK_THROWS(checks, world.run({.operation = comm::Operation::AllGather, .output = small, .input = big}),
                      "output holds 1 elements", "needs");
    world.run({.operation = comm::Operation::Barrier});
  });
  REQUIRE_RANK_CHECKS(checks);
}

// A group of one has no shared segment: an algorithm that uses one must still run (it crashed
// the shared-memory barrier, asked for by name or by COMM_ALGO).
TEST_CASE("a group of one runs every algorithm it may be asked for", "[async]") {
  RankChecks checks;
  run_ranks(1, [&](comm::ProcessGroup& world) {
    for (const auto& entry : comm::algorithms::algorithm_table()) {
      if (entry.requirement == comm::algorithms::Requirement::Hierarchy) continue;
      std::vector<std::int32_t> input{1, 2, 3, 4}, output(4, 0);
      std::vector<Buffer> block{Buffer(output)};
      std::vector<std::size_t> all_four{4};
      comm::Call call{.operation = static_cast<comm::Operation>(entry.collective),
                      .output = output,
                      .input = input,
                      .algorithm = to_string(entry.algorithm)};
      if (entry.collective == comm::Collective::Broadcast || entry.collective == comm::Collective::AllReduce ||
          entry.collective == comm::Collective::Reduce) {
        output = input;
      } else if (entry.collective == comm::Collective::Gather) {
        call.blocks = block;
      } else if (entry.collective == comm::Collective::Scatter) {
        block = {Buffer(input)};
        call.blocks = block;
      } else if (comm::traits_of(entry.collective).counts != comm::CollectiveTraits::Counts::Even) {
        call.input_counts = all_four;  // each uneven form reads the side it has
        call.output_counts = all_four;
      }
      INFO(to_string(entry.collective) << " " << to_string(entry.algorithm));
      world.run(call);
      if (entry.collective != comm::Collective::Barrier) RANK_CHECK(checks, output == input);
    }
  });
  REQUIRE_RANK_CHECKS(checks);
}

// What torch's Future (and any event loop) needs of a Work: news of its completion without a
// thread that waits on it.
TEST_CASE("a Work's completion callback runs once, without anyone waiting, with the outcome", "[async]") {
  for (std::string transport : {"tcp", "shm"}) {
    RankChecks checks;
    run_ranks(
        2,
        [&](comm::ProcessGroup& world) {
          int me = world.rank();
          std::mutex mutex;
          std::condition_variable changed;
          int calls = 0;
          auto note = [&] {
            std::lock_guard lock(mutex);
            ++calls;
            changed.notify_all();
          };
          auto wait_for_calls = [&](int count) {
            std::unique_lock lock(mutex);
            return changed.wait_for(lock, std::chrono::seconds(10), [&] { return calls >= count; });
          };
          // A collective, and a receive that completes only when the peer sends a while later.
          std::vector<double> data(1000, me + 1.0);
          auto reduce = world.iall_reduce(data);
          reduce->on_completion(note);
          std::vector<int> message(4, -1);
          std::shared_ptr<comm::Work> receive;
          if (me == 0) {
            receive = world.irecv(message, 1, 7);
            receive->on_completion(note);
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            std::vector<int> sent{1, 2, 3, 4};
            world.send(sent, 0, 7);
          }
          RANK_CHECK(checks, wait_for_calls(me == 0 ? 2 : 1));
          RANK_CHECK(checks, reduce->is_completed() && data[0] == 3.0 && data[999] == 3.0);
          if (me == 0) RANK_CHECK(checks, receive->is_completed() && message[3] == 4);
          // On a Work that is done already, the callback runs at once, here.
          int before = calls;
          reduce->on_completion(note);
          RANK_CHECK(checks, calls == before + 1);
          world.barrier();
          // A failure completes the Work too: the callback runs, and wait() rethrows.
          if (me == 0) {
            std::vector<int> never(1);
            auto orphan = world.irecv(never, 1, 99);
            orphan->on_completion(note);
            world.abort();
            RANK_CHECK(checks, wait_for_calls(before + 2));
            RANK_CHECK(checks, orphan->is_completed());
            bool threw = false;
            try {
              orphan->wait();
            } catch (const comm::Error&) {
              threw = true;
            }
            RANK_CHECK(checks, threw);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          RANK_CHECK(checks, calls == (me == 0 ? before + 2 : before + 1));  // each callback once
        },
        std::chrono::seconds(60), transport);
    INFO(transport);
    REQUIRE_RANK_CHECKS(checks);
  }
}

TEST_CASE("collectives reject bad input on the calling rank", "[collectives][bad-input]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> data(4, 1.0f), small(3), large(8);
    std::vector<double> doubles(8);
    RANK_CHECK_THROWS(checks, group.broadcast(data, 2), "root 2 is not a rank");
    RANK_CHECK_THROWS(checks, group.reduce(data, -1), "root -1 is not a rank");
    RANK_CHECK_THROWS(checks, group.all_gather(small, data), "output holds 3 elements", "needs");
    RANK_CHECK_THROWS(checks, group.all_gather(doubles, data), "same dtype");
    RANK_CHECK_THROWS(checks, group.reduce_scatter(data, small), "input holds 3");
    RANK_CHECK_THROWS(checks, group.all_to_all(large, small), "not a multiple");
    RANK_CHECK_THROWS(checks, group.reduce(Buffer(nullptr, 2, DType::Int32), 0), "null pointer");
    RANK_CHECK_THROWS(checks, group.reduce_scatter(Buffer(data), Buffer(large), ReduceOp::BXor), "bxor", "float32");
    std::vector<Buffer> one{Buffer(data)};
    RANK_CHECK_THROWS(checks, group.all_gather(one, data), "pass one per rank");
    // Without a GPU (or without CUDA in the build), a buffer tagged cuda:0 is refused clearly.
    RANK_CHECK_THROWS(
        checks, group.all_reduce(Buffer(data.data(), 4, DType::Float32, comm::Device{comm::Device::Kind::Cuda, 0})),
        "cuda:0");
    if (group.rank() == 0) RANK_CHECK_THROWS(checks, group.gather(data, one, 0), "pass one per rank");
    group.all_reduce(data);  // the group still works afterwards
    RANK_CHECK(checks, data[0] == 2.0f);
  });
  REQUIRE_RANK_CHECKS(checks);
}
