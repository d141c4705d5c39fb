#include "rendezvous/programs/core_reservation.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace comm::launcher {
namespace {

// Locks (F_WRLCK) or unlocks (F_UNLCK) byte `core` of the file for this open file description;
// false when another holds it.
bool set_lock(int fd, int core, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = core;
  lock.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

}  // namespace

CoreReservation::CoreReservation(const std::vector<int>& allowed, int wanted, const std::string& lock_path) {
  if (wanted <= 0) return;
  if (static_cast<int>(allowed.size()) < wanted) {
    why_ = std::to_string(wanted) + " ranks but " + std::to_string(allowed.size()) + " usable cores";
    return;
  }
  // Everyone may lock (and nobody needs to write): the file stays empty; the locks are the state.
  mode_t previous = ::umask(0);
  file_ = FileDescriptor(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  ::umask(previous);
  if (file_.get() < 0) {
    why_ = "cannot open " + lock_path + " to share cores with other jobs (" + std::strerror(errno) + ")";
    return;
  }
  for (int core : allowed) {
    if (static_cast<int>(cores_.size()) == wanted) break;
    if (set_lock(file_.get(), core, F_WRLCK)) cores_.push_back(core);
  }
  if (static_cast<int>(cores_.size()) < wanted) {
    for (int core : cores_) set_lock(file_.get(), core, F_UNLCK);
    why_ = "only " + std::to_string(cores_.size()) + " of the " + std::to_string(allowed.size()) +
           " usable cores are free of other commrun jobs, for " + std::to_string(wanted) + " ranks";
    cores_.clear();
  }
}

}  // namespace comm::launcher
