#include "libcomm/base/completion.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <ctime>
#include <utility>

#include "libcomm/base/environment.hpp"
#include "libcomm/base/oversubscription.hpp"

namespace comm::detail {

std::chrono::nanoseconds spin_budget() {
  static const std::chrono::nanoseconds budget = [] {
    auto microseconds =
        environment::get_integer_in("COMM_SPIN_US", 0, 1'000'000, "microseconds a waiter polls before it sleeps");
    return std::chrono::nanoseconds(std::chrono::microseconds(microseconds.value_or(100)));
  }();
  return budget;
}

void Completion::complete(std::size_t bytes, int source) {
  bytes_ = bytes;
  source_ = source;
  finish(kDone);
}

void Completion::fail(std::exception_ptr error) {
  error_ = std::move(error);
  finish(kFailed);
}

void Completion::finish(std::uint32_t state) {
  // The exchange publishes bytes_/source_/error_ and is the last touch of this object unless a
  // thread sleeps on it or a callback waits: a waiter that sees the outcome may destroy a
  // completion on its stack at once (those never have callbacks).
  std::uint32_t before = state_.exchange(state, std::memory_order_acq_rel);
  if ((before & kCallback) != 0) std::exchange(callback_, nullptr)();
  if ((before & kSleeper) != 0) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }
}

void Completion::when_done(std::function<void()> callback) {
  callback_ = std::move(callback);
  std::uint32_t seen = state_.load(std::memory_order_acquire);
  while ((seen & kOutcome) == kPending) {
    if (state_.compare_exchange_weak(seen, seen | kCallback, std::memory_order_acq_rel)) return;  // finish() runs it
  }
  std::exchange(callback_, nullptr)();
}

void Completion::sleep_until(std::chrono::steady_clock::time_point until) {
  std::uint32_t expected = state_.load(std::memory_order_acquire);
  while ((expected & kOutcome) == kPending && (expected & kSleeper) == 0) {
    if (state_.compare_exchange_weak(expected, expected | kSleeper, std::memory_order_acq_rel)) expected |= kSleeper;
  }
  if ((expected & kOutcome) != kPending) return;  // done meanwhile
  auto left = until - std::chrono::steady_clock::now();
  if (left <= std::chrono::nanoseconds::zero()) return;
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
  timespec relative{static_cast<std::time_t>(seconds.count()),
                    static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(left - seconds).count())};
  // Returns at once if the word changed since (no lost wake-up), on a wake-up, or on timeout.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, expected, &relative, nullptr, 0);
}

void Completion::rethrow_if_failed() const {
  if (failed()) std::rethrow_exception(error_);
}

void Completion::wait() {
  while (!wait_for(std::chrono::hours(24))) {
  }
}

bool Completion::wait_for(std::chrono::nanoseconds timeout) {
  using Clock = std::chrono::steady_clock;
  if (done()) {  // e.g. an eager send: no clock reads, no progressor lock
    rethrow_if_failed();
    return true;
  }
  if (timeout.count() <= 0) {
    // A test (is_completed): one poll, so a caller that only ever tests still moves things.
    if (auto progressor = driver()) progressor->progress(peer_hint_, this);
    if (!done()) return false;
    rethrow_if_failed();
    return true;
  }
  // The clock is first read after 64 polls: most answers come sooner, and a clock read costs
  // as much as a poll on this kind of VM. The deadline counts from then (a few microseconds late).
  Clock::time_point deadline = Clock::time_point::max(), spin_until{};
  bool clock_started = false;
  auto set_deadline = [&](Clock::time_point now) {
    clock_started = true;
    if (timeout <= std::chrono::hours(24 * 365)) deadline = now + timeout;
    spin_until = std::min(deadline, now + spin_budget());
  };
  // Spin: drive progress ourselves while the answer is likely to be a few microseconds away.
  if (spin_budget().count() > 0) {
    auto progressor = driver();
    if (progressor) progressor->spinning(true);
    bool moved = false;
    for (unsigned round = 0; !done(); ++round) {
      if (progressor && progressor->progress(peer_hint_, this)) moved = true;
      if (done()) break;
      pause_between_polls();
      if ((round & 63) == 63) {
        auto now = Clock::now();
        if (round == 63) set_deadline(now);
        if (moved) spin_until = std::min(deadline, now + spin_budget());
        moved = false;
        if (now >= spin_until) break;
        ::sched_yield();  // oversubscribed ranks must not starve the peer we wait for
      }
    }
    if (progressor) {
      progressor->spinning(false);
      if (!done()) progressor->waiter_sleeps();
    }
  }
  if (!done()) {
    if (!clock_started) set_deadline(Clock::now());
    // Sleep; the transport's progress thread completes us. Wake now and then to drive progress
    // in case nothing else does (a transport without a progress thread).
    while (!done() && Clock::now() < deadline) {
      sleep_until(std::min<Clock::time_point>(deadline, Clock::now() + std::chrono::milliseconds(50)));
      if (!done()) {
        if (auto progressor = driver()) progressor->progress(peer_hint_, this);
      }
    }
  }
  if (!done()) return false;
  rethrow_if_failed();
  return true;
}

}  // namespace comm::detail
