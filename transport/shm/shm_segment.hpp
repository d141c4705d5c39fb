// Making and sharing the shared-memory segments of the ranks' receive rings and the collectives' arena.
//
// A segment is created in /dev/shm under a fresh name and unlinked at once: from then on it has
// no name that a killed job could leave behind (a hand-started job killed during set-up left
// 8 MiB segments there), and only its creator's descriptor reaches it. The other ranks open it
// through that descriptor's /proc/PID/fd/N path, which the creator publishes and keeps open while
// the segment is in use. Its pages are reserved when it is made: a tmpfs hands them out only when
// first touched, so a segment larger than what /dev/shm has left would otherwise be found out by
// a SIGBUS in the middle of a collective (8 ranks under Docker's 64 MiB /dev/shm). Reserved, a
// full /dev/shm is an error at set-up, with what was needed, what is free and how to get more.
#pragma once

#include <cstddef>
#include <string>

#include "libcomm/base/guarded_file.hpp"

namespace comm::transport {

struct CreatedSegment {
  OwnedDescriptor file;  // invalid when `problem` says why it could not be made
  std::string path;      // /proc/PID/fd/N: how the other ranks open it while `file` is open
  std::string problem;
};

// A new segment of `bytes` reserved bytes; `name` (unique to the job and rank) is linked in
// /dev/shm only for the moment it takes to create and unlink it. Throws IoError when /dev/shm
// cannot be used at all; a shortage of space is `problem`, so that the caller can fall back.
CreatedSegment create_segment(const std::string& name, std::size_t bytes);

// What /dev/shm has free now (0 when it cannot be asked).
std::size_t free_shared_memory_bytes();

// Opens a segment another rank created, from the path it published; an invalid descriptor when
// the path is gone (its creator ended before the caller opened it). Throws IoError when the path
// is not one create_segment makes, or is not a segment of this user of `bytes` bytes.
OwnedDescriptor open_segment(const std::string& path, std::size_t bytes);

}  // namespace comm::transport
