// How the set-up of a transport settles on one cause when a rank dies: the first cause learned
// or told stands, however the world looks when it comes back up through the failure hooks.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "transport/job_failure.hpp"

using comm::Error;
using comm::ErrorContext;
using comm::PeerClosedError;
using comm::transport::JobFailure;
using comm::transport::SettledJobFailure;

namespace {

// Three ranks; rank 2 died and rank 0, which hosts the store, published that and exited. Rank 1
// reads the published cause once; after that the store is gone (the rendezvous layer reports
// nothing then) and rank 0's connection is closed too.
struct AfterRankZeroLeft {
  int published_reads = 0;
  std::string told;
  JobFailure job_failure{
      .check =
          [this] {
            if (published_reads++ == 0)
              throw PeerClosedError("rank 2 died", ErrorContext{.rank = 1, .peer = 2, .op = "init_process_group"});
          },
      .fail =
          [this](const Error& error) {
            told = error.message();
            throw PeerClosedError(error.message() + "; and the store is unreachable", error.context());
          },
  };
  // The mesh as rank 1 now sees it: rank 0's connection is the first closed one.
  static void look_at_peers() {
    throw PeerClosedError("rank 0 died (its connection closed)",
                          ErrorContext{.rank = 1, .peer = 0, .op = "init_process_group"});
  }
};

// What a set-up step does with a failure hook: tell it, then rethrow what it caught.
template <typename Wait, typename Hook>
int peer_blamed(Wait wait, Hook hook) {
  try {
    try {
      wait();
    } catch (const Error& error) {
      hook(error);
      throw;
    }
  } catch (const PeerClosedError& error) {
    return error.peer();
  }
  FAIL("no failure came out of the wait");
  return -1;
}

}  // namespace

TEST_CASE("The published cause stands when it comes back up through a failure hook", "[job_failure]") {
  AfterRankZeroLeft world;
  SettledJobFailure failure(world.job_failure);
  int blamed = peer_blamed([&] { failure.check(AfterRankZeroLeft::look_at_peers); },
                           [&](const Error& error) { failure.fail(error, AfterRankZeroLeft::look_at_peers); });
  CHECK(blamed == 2);
  CHECK(world.told.empty());  // a cause read from the store is not published again
  CHECK(world.published_reads == 1);
  // The mesh's hook may be handed the same failure again on the way out: still nothing told.
  PeerClosedError again("rank 2 died", ErrorContext{.rank = 1, .peer = 2});
  CHECK(peer_blamed([&] { throw again; }, [&](const Error& error) { failure.fail(error); }) == 2);
  CHECK(world.told.empty());
}

TEST_CASE("A dead peer found by this rank is published once, and wins over the error that led to it", "[job_failure]") {
  std::string told;
  int tellings = 0;
  JobFailure job_failure{.fail = [&](const Error& error) {
    told = error.message();
    ++tellings;
    throw PeerClosedError(error.message(), error.context());
  }};
  SettledJobFailure failure(job_failure);
  // A segment found gone (the hook's error) while the mesh shows which rank died.
  PeerClosedError segment_gone("the segment rank 0 made went", ErrorContext{.rank = 1, .peer = 0});
  int blamed = peer_blamed(
      [&] { throw segment_gone; },
      [&](const Error& error) {
        failure.fail(error, [] { throw PeerClosedError("rank 2 died", ErrorContext{.rank = 1, .peer = 2}); });
      });
  CHECK(blamed == 2);
  CHECK(told == "rank 2 died");
  // Settled: a later finding is not told again, and the caller's own error stands.
  blamed = peer_blamed([&] { throw segment_gone; }, [&](const Error& error) { failure.fail(error); });
  CHECK(blamed == 0);
  CHECK(tellings == 1);
}

TEST_CASE("With nothing published and every peer alive, the hook tells this rank's error and the caller throws it",
          "[job_failure]") {
  std::string told;
  JobFailure job_failure{.fail = [&](const Error& error) { told = error.message(); }};
  SettledJobFailure failure(job_failure);
  int blamed = peer_blamed([] { throw PeerClosedError("rank 3 died", ErrorContext{.rank = 1, .peer = 3}); },
                           [&](const Error& error) { failure.fail(error, [] {}); });
  CHECK(blamed == 3);
  CHECK(told == "rank 3 died");
}
