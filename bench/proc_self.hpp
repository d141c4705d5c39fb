// What this process holds, from /proc/self: the benches that measure start-up at many ranks
// (startup_probe.cpp, many_ranks.cpp) report sockets and threads from here.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <string>

namespace bench {

// Entries of a /proc/self folder; for "fd", only those that are sockets. -1 when unreadable.
inline int count_entries(const char* folder, bool sockets_only) {
  DIR* directory = ::opendir(folder);
  if (directory == nullptr) return -1;
  int count = 0;
  while (dirent* entry = ::readdir(directory)) {
    if (entry->d_name[0] == '.') continue;
    if (sockets_only) {
      char target[64] = {};
      std::string path = std::string(folder) + "/" + entry->d_name;
      if (::readlink(path.c_str(), target, sizeof target - 1) <= 0 || std::string(target).rfind("socket:", 0) != 0) {
        continue;
      }
    }
    ++count;
  }
  ::closedir(directory);
  return count;
}

inline int count_sockets() { return count_entries("/proc/self/fd", true); }
inline int count_threads() { return count_entries("/proc/self/task", false); }

}  // namespace bench
