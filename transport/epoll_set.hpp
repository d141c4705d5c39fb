// The descriptors a progress thread sleeps on, owned and checked: an epoll set, and an eventfd
// that wakes the thread. Every system call's failure is an IoError naming the call.
#pragma once

#include <sys/epoll.h>

#include <cstdint>

namespace comm::transport {

class EpollSet {
 public:
  EpollSet();
  ~EpollSet();
  EpollSet(const EpollSet&) = delete;
  EpollSet& operator=(const EpollSet&) = delete;

  // Readable while one of its descriptors is ready (an epoll set can sleep in another).
  int fd() const { return fd_; }
  // `key` comes back in epoll_event::data.u64 when `fd` is ready.
  void add(int fd, std::uint32_t events, std::uint64_t key);
  void modify(int fd, std::uint32_t events, std::uint64_t key);
  // A descriptor the set no longer holds (closed already, say) is not an error.
  void remove(int fd);
  // Ready events (0 on a timeout or a signal); timeout_ms -1 waits without end.
  int wait(epoll_event* events, int capacity, int timeout_ms);

 private:
  int fd_;
};

class WakeEvent {
 public:
  WakeEvent();
  ~WakeEvent();
  WakeEvent(const WakeEvent&) = delete;
  WakeEvent& operator=(const WakeEvent&) = delete;

  int fd() const { return fd_; }
  // Makes fd() readable until drain(); never blocks, and may be called from any thread.
  void signal();
  void drain();

 private:
  int fd_;
};

}  // namespace comm::transport
