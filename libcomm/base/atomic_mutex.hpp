// A mutex on one atomic word, for locks taken on every message (the transport's): uncontended,
// lock and unlock are one atomic instruction each, where glibc's pthread mutex spends about 55
// instructions a pair on its type dispatch (measured by bench/hot_path_instructions.py). A thread
// that finds it taken sleeps in the kernel (C++20 atomic wait: a futex), as with std::mutex; it
// meets the standard's Lockable requirements, so std::lock_guard and std::unique_lock take it.
#pragma once

#include <atomic>
#include <cstdint>

namespace comm::detail {

class AtomicMutex {
 public:
  AtomicMutex() = default;
  AtomicMutex(const AtomicMutex&) = delete;
  AtomicMutex& operator=(const AtomicMutex&) = delete;

  void lock() {
    std::uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire)) [[unlikely]]
      lock_contended();
  }
  bool try_lock() {
    std::uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) [[unlikely]]
      state_.notify_one();
  }

 private:
  // kContended: locked, and a thread may sleep on the word, so unlock must wake one. A thread
  // that wakes takes the lock as kContended again: it cannot know whether others still sleep.
  static constexpr std::uint32_t kFree = 0, kLocked = 1, kContended = 2;
  void lock_contended() {
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree) {
      state_.wait(kContended, std::memory_order_relaxed);
    }
  }

  std::atomic<std::uint32_t> state_{kFree};
};

}  // namespace comm::detail
