#include "rendezvous/programs/core_reservation.hpp"

#include <fcntl.h>

#include <string>

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
  // It lives in a directory every user may write, so it is opened so that nobody can redirect it.
  auto opened = open_guarded(lock_path, 0666, "commrun's core lock file");
  if (!opened.file.valid()) {
    why_ = opened.problem;
    refused_ = true;
    return;
  }
  file_ = std::move(opened.file);
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
