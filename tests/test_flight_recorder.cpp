// The flight recorder's ring (libcomm/base/flight_recorder.hpp) on its own: what a copy holds
// after the ring wraps, a handle whose entry was reused, and copies taken while other threads
// write (never a torn entry).
#include <catch2/catch_test_macros.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "comm/call.hpp"
#include "libcomm/base/flight_recorder.hpp"

using comm::trace::FlightRecorder;
using comm::trace::State;

namespace {

constexpr auto kAllReduce = static_cast<std::uint8_t>(comm::Operation::AllReduce);
constexpr auto kSend = static_cast<std::uint8_t>(comm::Operation::Send);

}  // namespace

TEST_CASE("a copy holds the newest entries, oldest first, as they were written", "[trace]") {
  FlightRecorder recorder(6);  // rounded up to 8
  REQUIRE(recorder.capacity() == 8);
  std::vector<comm::trace::Handle> handles;
  for (std::uint64_t call = 0; call < 20; ++call) {
    handles.push_back(recorder.begin(1, kAllReduce, call, call * 10, 0, 2, -1, 0));
    if (call % 3 == 0) handles.back().start();
    if (call % 2 == 0) handles.back().finish(State::Completed);
  }
  auto copy = recorder.copy();
  REQUIRE(copy.entries.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    const auto& entry = copy.entries[i];
    std::uint64_t call = 12 + i;
    CHECK(entry.id == call + 1);
    CHECK(entry.sequence == call);
    CHECK(entry.count == call * 10);
    CHECK(entry.group == 1);
    CHECK(entry.operation == kAllReduce);
    CHECK(entry.algorithm == 2);
    CHECK((entry.started != 0) == (call % 3 == 0));
    CHECK((entry.finish != 0) == (call % 2 == 0));
    if (entry.finish != 0) {
      CHECK((entry.finish & 3) == static_cast<std::uint64_t>(State::Completed));
      CHECK(static_cast<std::int64_t>(entry.finish >> 2) >= entry.queued);
    }
  }
  // The handle of an entry the ring reused finishes nothing: entry 13's slot holds call 12.
  handles[4].finish(State::Failed);
  auto again = recorder.copy();
  CHECK(again.entries[0].id == 13);
  CHECK(again.entries[0].finish == copy.entries[0].finish);
}

TEST_CASE("a call recorded done carries one time for queued, started and completed", "[trace]") {
  FlightRecorder recorder(4);
  recorder.record_done(0, kSend, 7, 8, 3, 2);
  auto copy = recorder.copy();
  REQUIRE(copy.entries.size() == 1);
  const auto& entry = copy.entries[0];
  CHECK(entry.sequence == 7);
  CHECK(entry.peer == 2);
  CHECK((entry.flags & comm::trace::kStartedQueued) != 0);
  CHECK((entry.finish & 3) == static_cast<std::uint64_t>(State::Completed));
  CHECK(static_cast<std::int64_t>(entry.finish >> 2) == entry.queued);
}

TEST_CASE("copies taken while threads write hold only whole entries", "[trace]") {
  FlightRecorder recorder(64);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int thread = 0; thread < 3; ++thread) {
    writers.emplace_back([&, thread] {
      for (std::uint64_t call = 0; !stop.load(std::memory_order_relaxed); ++call) {
        // Every field follows from one number, so a mix of two writes shows.
        std::uint64_t value = (static_cast<std::uint64_t>(thread) << 40) | call;
        auto handle = recorder.begin(static_cast<std::uint16_t>(thread), kAllReduce, value, value * 3,
                                     static_cast<std::int8_t>(value % 7), static_cast<std::uint8_t>(value % 5),
                                     static_cast<std::int32_t>(value % 11), 0);
        handle.finish(State::Completed);
      }
    });
  }
  std::size_t seen = 0;
  for (int round = 0; round < 2000; ++round) {
    auto copy = recorder.copy();
    for (const auto& entry : copy.entries) {
      std::uint64_t value = entry.sequence;
      REQUIRE(entry.count == value * 3);
      REQUIRE(entry.group == (value >> 40));
      REQUIRE(entry.dtype == static_cast<std::int8_t>(value % 7));
      REQUIRE(entry.algorithm == value % 5);
      REQUIRE(entry.peer == static_cast<std::int32_t>(value % 11));
      ++seen;
    }
    for (std::size_t i = 1; i < copy.entries.size(); ++i) REQUIRE(copy.entries[i - 1].id < copy.entries[i].id);
  }
  stop = true;
  for (auto& writer : writers) writer.join();
  CHECK(seen > 0);
}
