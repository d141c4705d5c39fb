#include "transport/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include "comm/error.hpp"

namespace comm::transport {
namespace {

std::string mebibytes(unsigned long long bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

[[noreturn]] void fail_segment(const std::string& what, const std::string& name, int error) {
  throw IoError(what + " shared memory '" + name + "': " + std::strerror(error) +
                    "; is /dev/shm mounted and writable? COMM_TRANSPORT=tcp avoids shared memory",
                ErrorContext{.op = "transport.shm"});
}

std::string shortage(std::size_t bytes, const std::string& name, int error) {
  std::string problem =
      "cannot reserve " + mebibytes(bytes) + " of shared memory for '" + name + "': " + std::strerror(error);
  struct statvfs space {};
  if (::statvfs("/dev/shm", &space) == 0) {
    problem += " (/dev/shm has " + mebibytes(static_cast<unsigned long long>(space.f_bavail) * space.f_frsize) +
               " free of " + mebibytes(static_cast<unsigned long long>(space.f_blocks) * space.f_frsize) + ")";
  }
  if (error == ENOSPC) {
    problem +=
        "; each rank on a host needs up to 4 MiB per other rank there (at most COMM_SHM_BUDGET_MB, 64 by "
        "default) and the shared-memory collectives more: give /dev/shm "
        "more room (docker run --shm-size=1g, or mount -o remount,size=1G /dev/shm), or run fewer ranks "
        "per host";
  }
  return problem;
}

}  // namespace

std::size_t free_shared_memory_bytes() {
  struct statvfs space {};
  if (::statvfs("/dev/shm", &space) != 0) return 0;
  return static_cast<std::size_t>(space.f_bavail) * space.f_frsize;
}

CreatedSegment create_segment(const std::string& name, std::size_t bytes) {
  CreatedSegment created;
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail_segment("cannot create", name, errno);
  ::shm_unlink(name.c_str());  // nothing named stays behind, whatever happens next
  created.file = OwnedDescriptor(fd);
  if (int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    created.problem = shortage(bytes, name, error);
    created.file.reset();
    return created;
  }
  created.path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
  return created;
}

OwnedDescriptor open_segment(const std::string& path, std::size_t bytes) {
  // Only the paths create_segment publishes: a store others may write must not make this rank
  // open (and write into) any other file.
  static const std::regex kForm("/proc/[0-9]{1,10}/fd/[0-9]{1,10}");
  if (!std::regex_match(path, kForm)) fail_segment("refusing to open", path, EINVAL);
  OwnedDescriptor file(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!file.valid() && errno == ENOENT) return file;  // its creator has let go of it: it ended
  if (!file.valid()) fail_segment("cannot open", path, errno);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0) fail_segment("cannot inspect", path, errno);
  if (!S_ISREG(status.st_mode) || status.st_uid != ::geteuid() || static_cast<std::size_t>(status.st_size) != bytes) {
    throw IoError("refusing shared memory at " + path + ": not a segment of this user of " + std::to_string(bytes) +
                      " bytes (a stranger's answer in the store?)",
                  ErrorContext{.op = "transport.shm"});
  }
  return file;
}

}  // namespace comm::transport
