// Opening files that live where other users may write (/dev/shm, /tmp, a shared directory), so
// that nobody can redirect them: a symlink or a second hard link planted at the path, a file some
// other user made or left writable to others, is refused with the reason instead of being used.
// Without this, a root process creating a file there could be made to create or open any file
// on the machine (the commrun lock-file hole of issue 27).
#pragma once

#include <sys/types.h>

#include <string>

namespace comm {

// An owned descriptor: closed when it goes, moved but never copied.
class OwnedDescriptor {
 public:
  explicit OwnedDescriptor(int fd = -1) : fd_(fd) {}
  ~OwnedDescriptor() { reset(); }
  OwnedDescriptor(OwnedDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OwnedDescriptor& operator=(OwnedDescriptor&& other) noexcept;
  OwnedDescriptor(const OwnedDescriptor&) = delete;
  OwnedDescriptor& operator=(const OwnedDescriptor&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_;
};

struct GuardedOpen {
  OwnedDescriptor file;  // invalid when refused or not opened
  std::string problem;   // why, in words that say what to do, when the file is invalid
};

// Opens `path` read-write, creating it with `create_mode` (exactly: the umask does not apply)
// when absent. The last component is never followed if it is a symlink, and the file is used
// only when it is a regular file with one link, owned by this user or by root, and grants no
// permission beyond `create_mode`. `what` names the file in the problem ("commrun's lock file").
GuardedOpen open_guarded(const std::string& path, mode_t create_mode, const std::string& what);

}  // namespace comm
