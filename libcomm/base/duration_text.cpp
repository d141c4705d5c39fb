#include "libcomm/base/duration_text.hpp"

#include <cstdio>

namespace comm {

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

}  // namespace comm
