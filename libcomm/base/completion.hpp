// Completion: the shared state behind a Work. The library completes or fails it (from any
// thread); waiters first spin for a short while, driving progress themselves (a round trip on
// this kind of VM costs less than one sleep/wake-up), then sleep until completion.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace comm::detail {

class Completion;

// Something that can move pending work forward without blocking (a transport).
class Progressor {
 public:
  virtual ~Progressor() = default;
  // peer_hint: the peer whose traffic the waiter needs (-1: any); awaited: the completion it
  // waits for (null: none), so the transport can stop polling as soon as that one is done.
  // Must not block. True when bytes moved: a waiter keeps spinning while data flows, and
  // sleeps only once it stalls.
  virtual bool progress(int peer_hint, const Completion* awaited = nullptr) = 0;
  // A waiter starts (true) or stops (false) spinning on progress(): while one spins, the
  // transport need not wake a sleeping thread for every arrival.
  virtual void spinning(bool) {}
  // A waiter stopped spinning without its answer and will sleep: whatever completes it must
  // be able to wake up now.
  virtual void waiter_sleeps() {}
};

class Completion {
 public:
  Completion() = default;
  Completion(std::weak_ptr<Progressor> progressor, int peer_hint)
      : progressor_(std::move(progressor)), peer_hint_(peer_hint) {}
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  bool done() const { return state_.load(std::memory_order_acquire) != kPending; }
  bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }

  // Exactly one of these is called, once.
  void complete(std::size_t bytes, int source);
  void fail(std::exception_ptr error);

  // Blocks until done; rethrows the failure.
  void wait();
  // False when the timeout passed first.
  bool wait_for(std::chrono::nanoseconds timeout);
  void rethrow_if_failed() const;

  std::size_t bytes() const { return bytes_; }
  int source() const { return source_; }

 private:
  static constexpr int kPending = 0, kDone = 1, kFailed = 2;
  void finish(int state);

  std::atomic<int> state_{kPending};
  std::size_t bytes_ = 0;
  int source_ = -1;
  std::exception_ptr error_;
  std::weak_ptr<Progressor> progressor_;
  int peer_hint_ = -1;
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable woken_;
};

// How long a waiter spins before sleeping (COMM_SPIN_US, default 100).
std::chrono::nanoseconds spin_budget();

}  // namespace comm::detail
