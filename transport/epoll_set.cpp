#include "transport/epoll_set.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "comm/error.hpp"

namespace comm::transport {
namespace {

[[noreturn]] void fail(const char* call) {
  throw IoError(std::string(call) + " failed: " + std::strerror(errno) +
                    " (the process may be out of descriptors or memory: check ulimit -n)",
                ErrorContext{.op = "transport"});
}

}  // namespace

EpollSet::EpollSet() : fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (fd_ < 0) fail("epoll_create1");
}

EpollSet::~EpollSet() { ::close(fd_); }

void EpollSet::add(int fd, std::uint32_t events, std::uint64_t key) {
  epoll_event event{events, {.u64 = key}};
  if (::epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &event) != 0) fail("epoll_ctl(ADD)");
}

void EpollSet::modify(int fd, std::uint32_t events, std::uint64_t key) {
  epoll_event event{events, {.u64 = key}};
  if (::epoll_ctl(fd_, EPOLL_CTL_MOD, fd, &event) != 0) fail("epoll_ctl(MOD)");
}

void EpollSet::remove(int fd) {
  if (::epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != ENOENT && errno != EBADF) fail("epoll_ctl(DEL)");
}

int EpollSet::wait(epoll_event* events, int capacity, int timeout_ms) {
  int ready = ::epoll_wait(fd_, events, capacity, timeout_ms);
  if (ready < 0) {
    if (errno == EINTR) return 0;
    fail("epoll_wait");
  }
  return ready;
}

WakeEvent::WakeEvent() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) fail("eventfd");
}

WakeEvent::~WakeEvent() { ::close(fd_); }

// An eventfd write fails only when the counter would overflow, and then it is readable anyway.
void WakeEvent::signal() {
  std::uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof one);
}

// Non-blocking: nothing to read (EAGAIN) means nothing was signalled.
void WakeEvent::drain() {
  std::uint64_t count;
  (void)!::read(fd_, &count, sizeof count);
}

}  // namespace comm::transport
