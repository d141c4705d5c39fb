#include "transport/message/progress_thread.hpp"

#include "comm/error.hpp"

namespace comm::transport {

ProgressThread::ProgressThread() {
  epoll_.add(wake_.fd(), EPOLLIN, kWakeKey);
  idle_epoll_.add(wake_.fd(), EPOLLIN, kWakeKey);
}

ProgressThread::~ProgressThread() { stop(); }

void ProgressThread::watch(int fd, std::uint64_t key) { epoll_.add(fd, EPOLLIN, key); }

void ProgressThread::watch_output(int fd, std::uint64_t key, bool on) {
  epoll_.modify(fd, on ? EPOLLIN | EPOLLOUT : EPOLLIN, key);
}

void ProgressThread::unwatch(int fd) { epoll_.remove(fd); }

void ProgressThread::start(Driver& driver) {
  thread_ = std::thread([this, &driver] { run(driver); });
}

void ProgressThread::stop() {
  stopping_ = true;
  wake_.signal();
  if (thread_.joinable()) thread_.join();
}

// While a waiter spins, the thread does not re-arm the wake-ups peers would send it (one
// doorbell per message would cost more than the message).
void ProgressThread::spinning(bool on) {
  // Stopping: one spinner fewer and one episode more (2^32 - 1 added: the borrow from the
  // spinners' count, which is at least 1, carries into the episodes).
  spin_state_.fetch_add(on ? 1 : (std::uint64_t{1} << kEpisodeShift) - 1);
}

void ProgressThread::waiter_sleeps() {
  if ((spin_state_.load() & kSpinners) > 0) return;
  waiter_asleep_.store(true);
  wake_.signal();  // the thread re-arms its wake-ups now
}

// Whether the thread may sleep deaf to the peers: a waiter spins, or one finished spinning
// since the thread last looked and none has gone to sleep since (a caller between two waits of
// a collective: it will be back spinning before the thread could help, and a thread woken for
// each arrival would take its core). The thread only; needs no lock.
bool ProgressThread::waiters_active() {
  std::uint64_t state = spin_state_.load();
  auto episodes = static_cast<std::uint32_t>(state >> kEpisodeShift);
  bool recent = episodes != seen_episodes_;
  seen_episodes_ = episodes;
  if (waiter_asleep_.exchange(false)) recent = false;
  return (state & kSpinners) > 0 || recent;
}

void ProgressThread::run(Driver& driver) {
  epoll_event events[64];
  try {
    while (!stopping_) {
      if (waiters_active()) {
        // Sleep deaf to the peers, unarmed and without the lock (a waiter that finds it taken
        // would sleep on it), for at most 1 ms, or until a waiter that gives up spinning pokes
        // wake_. Every armed sleep below was followed by woke_up(): nothing is left armed.
        if (idle_epoll_.wait(events, 64, 1) > 0) wake_.drain();
        continue;
      }
      bool may_sleep;
      {
        std::lock_guard lock(driver.mutex());
        may_sleep = driver.prepare_to_sleep();
        if (!may_sleep) {
          driver.woke_up();
          driver.service_all();
        }
      }
      if (!may_sleep) continue;
      int ready = epoll_.wait(events, 64, 1000);
      std::lock_guard lock(driver.mutex());
      driver.woke_up();
      for (int i = 0; i < ready; ++i) {
        if (events[i].data.u64 == kWakeKey) {
          wake_.drain();
        } else {
          driver.ready(events[i].data.u64);
        }
      }
    }
  } catch (const Error& error) {
    driver.thread_failed(std::string("the transport's progress thread stopped: ") + error.what());
  }
}

}  // namespace comm::transport
