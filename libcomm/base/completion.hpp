// Completion: the shared state behind a Work. The library completes or fails it (from any
// thread); waiters first spin for a short while, driving progress themselves (a round trip on
// this kind of VM costs less than one sleep/wake-up), then sleep until completion.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

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
  // For a completion on the waiter's stack: the caller keeps `progressor` alive while waiting,
  // and destroys the completion only once it is done (or withdrawn from the transport).
  Completion(Progressor* progressor, int peer_hint) : borrowed_(progressor), peer_hint_(peer_hint) {}
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  bool done() const { return (state_.load(std::memory_order_acquire) & kOutcome) != kPending; }
  bool failed() const { return (state_.load(std::memory_order_acquire) & kOutcome) == kFailed; }

  // Exactly one of these is called, once.
  void complete(std::size_t bytes, int source);
  void fail(std::exception_ptr error);
  // complete(), by the waiter itself: called from inside the progress() call with which the
  // thread waiting on this completion drives its transport (the transport knows it: it is what
  // progress() awaits). A completion on the waiter's stack has that one waiter, running, and no
  // callback, so a release store does what finish()'s exchange does, without a locked
  // instruction on the way from a message's arrival to its caller; any other takes complete().
  void complete_in_waiter(std::size_t bytes, int source) {
    if (borrowed_ == nullptr) [[unlikely]]
      return complete(bytes, source);
    bytes_ = bytes;
    source_ = source;
    state_.store(kDone, std::memory_order_release);
  }

  // Runs `callback` once done, on the thread that completes this (at once, here, when it is done
  // already). At most one per completion, and only on completions shared through a shared_ptr
  // (the completer's reference keeps it alive while the callback runs).
  void when_done(std::function<void()> callback);

  // Blocks until done; rethrows the failure.
  void wait();
  // False when the timeout passed first.
  bool wait_for(std::chrono::nanoseconds timeout);
  void rethrow_if_failed() const;

  std::size_t bytes() const { return bytes_; }
  int source() const { return source_; }

 private:
  // The state word holds the outcome and whether a thread sleeps on it (a futex): completing
  // is one exchange, and nothing touches the object after it unless someone sleeps.
  static constexpr std::uint32_t kPending = 0, kDone = 1, kFailed = 2, kOutcome = 3, kSleeper = 4, kCallback = 8;
  void finish(std::uint32_t state);
  // Sleeps until done or `until`, whichever is first (may return early).
  void sleep_until(std::chrono::steady_clock::time_point until);

  std::atomic<std::uint32_t> state_{kPending};
  std::size_t bytes_ = 0;
  int source_ = -1;
  std::exception_ptr error_;
  std::function<void()> callback_;  // set before kCallback is; run by finish()
  // The progressor, shared (a Work may outlive its group) or borrowed.
  std::shared_ptr<Progressor> driver() const {
    return borrowed_ != nullptr ? std::shared_ptr<Progressor>(std::shared_ptr<void>(), borrowed_) : progressor_.lock();
  }
  std::weak_ptr<Progressor> progressor_;
  Progressor* borrowed_ = nullptr;
  int peer_hint_ = -1;
};

// How long a waiter spins before sleeping (COMM_SPIN_US, default 100).
std::chrono::nanoseconds spin_budget();

}  // namespace comm::detail
