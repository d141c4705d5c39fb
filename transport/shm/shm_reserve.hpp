// Reserving the pages of a new shared-memory segment when it is made. A tmpfs such as /dev/shm
// hands out pages only when they are first touched, so a segment larger than what is left is
// found out by a SIGBUS in the middle of a collective (8 ranks under Docker's 64 MiB /dev/shm).
// Reserved at set-up, a full /dev/shm is an error there instead, with what was needed, what is
// free and how to get more.
#pragma once

#include <cstddef>
#include <string>

namespace comm::transport {

// Gives the segment open at `fd` `bytes` of reserved pages. Empty on success; else the problem,
// in words that say what to do.
std::string reserve_segment(int fd, std::size_t bytes, const std::string& name);

}  // namespace comm::transport
