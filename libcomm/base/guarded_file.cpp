#include "libcomm/base/guarded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace comm {

OwnedDescriptor& OwnedDescriptor::operator=(OwnedDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void OwnedDescriptor::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Why an opened file must not be used, or empty when it may.
std::string refusal(const struct stat& status, mode_t create_mode) {
  if (!S_ISREG(status.st_mode)) return "it is not a regular file";
  if (status.st_nlink != 1) {
    return "it has " + std::to_string(status.st_nlink) + " hard links (another name could point it at any file)";
  }
  if (status.st_uid != ::geteuid() && status.st_uid != 0) {
    return "it belongs to uid " + std::to_string(status.st_uid) + ", not to this user (uid " +
           std::to_string(::geteuid()) + ") or root";
  }
  // Extra bits that let others write (or run) it are a refusal; extra read bits are taken away
  // below, where this user owns the file (a file made by `touch` under umask 022).
  if ((status.st_mode & 07777 & ~create_mode & ~mode_t{0444}) != 0) {
    return "its mode " + octal(status.st_mode) + " grants more than " + octal(create_mode);
  }
  if ((status.st_mode & 07777 & ~create_mode) != 0 && status.st_uid != ::geteuid()) {
    return "its mode " + octal(status.st_mode) + " lets others read it";
  }
  return {};
}

}  // namespace

GuardedOpen open_guarded(const std::string& path, mode_t create_mode, const std::string& what) {
  GuardedOpen result;
  constexpr int kFlags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
  // Create exclusively first, so that what this call creates has exactly create_mode; if the
  // file is there already, open what is there and judge it.
  bool created = true;
  int fd = ::open(path.c_str(), kFlags | O_CREAT | O_EXCL, create_mode);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path.c_str(), kFlags);
  }
  if (fd < 0) {
    int error = errno;
    if (error == ELOOP) {
      result.problem = what + " " + path + " is a symbolic link; refusing to follow it (someone may be trying to " +
                       "redirect it): remove it";
    } else {
      result.problem = "cannot open " + what + " " + path + ": " + std::strerror(error);
    }
    return result;
  }
  OwnedDescriptor file(fd);
  if (created) {
    // The umask may have taken bits away; give the file exactly the mode promised.
    if (::fchmod(fd, create_mode) != 0) {
      result.problem = "cannot set the mode of " + what + " " + path + ": " + std::strerror(errno);
      return result;
    }
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    result.problem = "cannot inspect " + what + " " + path + ": " + std::strerror(errno);
    return result;
  }
  if (std::string why = refusal(status, create_mode); !why.empty()) {
    result.problem = "refusing " + what + " " + path + ": " + why + "; remove it (or fix it) and run again";
    return result;
  }
  if ((status.st_mode & 07777 & ~create_mode) != 0 && ::fchmod(fd, create_mode) != 0) {
    result.problem = "cannot take read permission for others off " + what + " " + path + ": " + std::strerror(errno);
    return result;
  }
  result.file = std::move(file);
  return result;
}

}  // namespace comm
