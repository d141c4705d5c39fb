// Which cores this commrun may pin its ranks to, shared with the other commrun jobs on the
// machine: each job claims free cores of its own affinity mask by locking one byte per core of
// one lock file (an open-file-description lock, so the claim ends when commrun does, however it
// ends), and pins only when it got a core for every rank. Two jobs, or two network namespaces
// standing in for hosts, never pin ranks to one core.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/programs/file_descriptor.hpp"

namespace comm::launcher {

class CoreReservation {
 public:
  // Claims `wanted` cores among `allowed`, in order; all or none (cores() is then empty, and
  // why() says so). `lock_path`: the machine-wide lock file.
  CoreReservation(const std::vector<int>& allowed, int wanted, const std::string& lock_path = kDefaultLockPath);
  CoreReservation(const CoreReservation&) = delete;
  CoreReservation& operator=(const CoreReservation&) = delete;

  const std::vector<int>& cores() const { return cores_; }
  const std::string& why() const { return why_; }
  // The lock file was refused (a symlink, another user's file, ...): worth a word even when
  // pinning was only asked for where it is free.
  bool lock_file_refused() const { return refused_; }

  static constexpr const char* kDefaultLockPath = "/dev/shm/commrun-cores.lock";

 private:
  FileDescriptor file_;  // closing it releases every claim
  std::vector<int> cores_;
  std::string why_;
  bool refused_ = false;
};

}  // namespace comm::launcher
