// The thread that completes a transport's transfers while nobody waits on them, and its
// hand-over with the callers that do. A waiter spins first, reading its peers itself: then the
// thread sleeps deaf to the peers (a thread woken by every arriving segment would take the
// waiter's core and lock). A waiter that gives up spinning and sleeps tells the thread, which
// re-arms the streams' wake-ups and completes what arrives. The transport says what to read
// and answer (Driver); the thread owns its descriptors.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "libcomm/base/atomic_mutex.hpp"
#include "transport/epoll_set.hpp"

namespace comm::transport {

class ProgressThread {
 public:
  // What the thread drives. Every call but thread_failed is made under mutex().
  class Driver {
   public:
    virtual detail::AtomicMutex& mutex() = 0;
    // Arms every stream's wake-up before the thread sleeps; false when one has work already.
    virtual bool prepare_to_sleep() = 0;
    // After a sleep, armed or not.
    virtual void woke_up() = 0;
    // Reads and answers every peer.
    virtual void service_all() = 0;
    // The descriptor watched with `key` is ready.
    virtual void ready(std::uint64_t key) = 0;
    // The thread cannot go on (a system call failed): fail everything, so no waiter hangs.
    virtual void thread_failed(const std::string& reason) = 0;

   protected:
    ~Driver() = default;
  };

  ProgressThread();
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // A descriptor to sleep on; `key` is what ready() gets.
  void watch(int fd, std::uint64_t key);
  // Also wake up when `fd` can take output (a socket with queued output).
  void watch_output(int fd, std::uint64_t key, bool on);
  void unwatch(int fd);
  void start(Driver& driver);
  // Joins the thread; idempotent.
  void stop();

  // The waiters' side of the hand-over (detail::Progressor's spinning and waiter_sleeps).
  void spinning(bool on);
  void waiter_sleeps();

 private:
  static constexpr std::uint64_t kWakeKey = ~std::uint64_t{0};
  bool waiters_active();
  void run(Driver& driver);

  EpollSet epoll_;       // every watched descriptor and wake_
  EpollSet idle_epoll_;  // wake_ only: where the thread sleeps while a waiter spins
  WakeEvent wake_;
  std::atomic<bool> stopping_{false};
  // Waiters spinning now (low 32 bits) and waits that stopped spinning so far (high 32 bits):
  // one word, so a waiter that stops spinning pays one atomic instruction.
  static constexpr std::uint64_t kSpinners = 0xFFFF'FFFF;
  static constexpr int kEpisodeShift = 32;
  std::atomic<std::uint64_t> spin_state_{0};
  std::atomic<bool> waiter_asleep_{false};  // a waiter went to sleep since the thread looked
  std::uint32_t seen_episodes_ = 0;         // the thread only
  std::thread thread_;
};

}  // namespace comm::transport
