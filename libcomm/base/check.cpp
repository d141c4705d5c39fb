#include "libcomm/base/check.hpp"

#include <cstring>

namespace comm::detail {

std::string with_location(const std::string& message, const char* file, int line) {
  // Keep the path from the source root on: absolute build paths say nothing to a user.
  const char* shown = file;
  for (const char* root : {"libcomm/", "rendezvous/", "transport/", "algorithms/", "cuda/"}) {
    if (const char* found = std::strstr(file, root)) {
      shown = found;
      break;
    }
  }
  return message + " (" + shown + ":" + std::to_string(line) + ")";
}

}  // namespace comm::detail
