#include "transport/shm/shm_reserve.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <cstring>

namespace comm::transport {
namespace {

std::string mebibytes(unsigned long long bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

std::string reserve_segment(int fd, std::size_t bytes, const std::string& name) {
  int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (error == 0) return {};
  std::string problem =
      "cannot reserve " + mebibytes(bytes) + " of shared memory for '" + name + "': " + std::strerror(error);
  struct statvfs space {};
  if (::statvfs("/dev/shm", &space) == 0) {
    problem += " (/dev/shm has " + mebibytes(static_cast<unsigned long long>(space.f_bavail) * space.f_frsize) +
               " free of " + mebibytes(static_cast<unsigned long long>(space.f_blocks) * space.f_frsize) + ")";
  }
  if (error == ENOSPC) {
    problem +=
        "; each pair of ranks on a host needs 8 MiB and the shared-memory collectives more: give /dev/shm "
        "more room (docker run --shm-size=1g, or mount -o remount,size=1G /dev/shm), or run fewer ranks "
        "per host";
  }
  return problem;
}

}  // namespace comm::transport
