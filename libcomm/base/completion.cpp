#include "completion.hpp"

#include <sched.h>

#include <cstdlib>

namespace comm::detail {

std::chrono::nanoseconds spin_budget() {
  static const std::chrono::nanoseconds budget = [] {
    const char* text = std::getenv("COMM_SPIN_US");
    long microseconds = text != nullptr ? std::strtol(text, nullptr, 10) : 100;
    return std::chrono::nanoseconds(std::chrono::microseconds(microseconds < 0 ? 0 : microseconds));
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

void Completion::finish(int state) {
  // seq_cst on both sides (here and the sleeper's increment then check): with release/acquire
  // the store and the load may pass each other, and a sleeper would miss its wake-up.
  state_.store(state, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(mutex_);  // a sleeper between its check and its wait holds the mutex
    woken_.notify_all();
  }
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
    if (auto progressor = progressor_.lock()) progressor->progress(peer_hint_, this);
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
    auto progressor = progressor_.lock();
    if (progressor) progressor->spinning(true);
    bool moved = false;
    for (unsigned round = 0; !done(); ++round) {
      if (progressor && progressor->progress(peer_hint_, this)) moved = true;
      if (done()) break;
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
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock lock(mutex_);
    while (!done() && Clock::now() < deadline) {
      auto slice = std::min<Clock::time_point>(deadline, Clock::now() + std::chrono::milliseconds(50));
      woken_.wait_until(lock, slice, [&] { return done(); });
      if (!done()) {
        lock.unlock();
        if (auto progressor = progressor_.lock()) progressor->progress(peer_hint_, this);
        lock.lock();
      }
    }
    sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (!done()) return false;
  rethrow_if_failed();
  return true;
}

}  // namespace comm::detail
