#include "libcomm/base/close_on_exec.hpp"

#include <fcntl.h>

namespace comm {

bool set_close_on_exec(int fd) {
  int flags = ::fcntl(fd, F_GETFD);
  return flags >= 0 && ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0;
}

}  // namespace comm
