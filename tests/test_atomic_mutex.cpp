// The transport's lock (libcomm/base/atomic_mutex.hpp): mutual exclusion under contention,
// sleepers woken (a lost wake-up would hang this test, which has a timeout), and try_lock.
#include <catch2/catch_test_macros.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "libcomm/base/atomic_mutex.hpp"

using comm::detail::AtomicMutex;

TEST_CASE("threads taking the lock never overlap, and each one that sleeps on it is woken") {
  AtomicMutex mutex;
  // A plain (non-atomic) pair: two threads inside at once would lose increments or see the
  // pair torn.
  std::uint64_t first = 0, second = 0;
  std::uint64_t torn = 0;
  constexpr int kThreads = 4, kRounds = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        std::lock_guard lock(mutex);
        if (first != second) ++torn;
        ++first;
        // Now and then hold the lock long enough that the others go to sleep on it.
        if ((round + t) % 5000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++second;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(torn == 0);
  CHECK(first == std::uint64_t{kThreads} * kRounds);
  CHECK(second == first);
}

TEST_CASE("try_lock takes a free lock and refuses a held one without waiting") {
  AtomicMutex mutex;
  REQUIRE(mutex.try_lock());
  auto other = std::async(std::launch::async, [&] { return mutex.try_lock(); });
  CHECK_FALSE(other.get());
  mutex.unlock();
  auto again = std::async(std::launch::async, [&] {
    bool taken = mutex.try_lock();
    if (taken) mutex.unlock();
    return taken;
  });
  CHECK(again.get());
  // A waiter blocked in lock() gets it once the holder lets go.
  mutex.lock();
  auto waiter = std::async(std::launch::async, [&] {
    std::lock_guard lock(mutex);
    return true;
  });
  CHECK(waiter.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);
  mutex.unlock();
  CHECK(waiter.get());
}
