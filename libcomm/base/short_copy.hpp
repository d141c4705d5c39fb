// An inline copy for the few bytes of a small message (a frame's 40-byte header, a payload of
// a word or two): a call to the library's memcpy with a length known only at run time costs
// such a message more than its copy does. Used where a small message is written into the
// shared-memory ring and where it is delivered from there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace comm::detail {

// Copies `bytes` with inline moves up to 64, the library's memcpy beyond; no overlap.
[[gnu::always_inline]] inline void copy_short(void* to_memory, const void* from_memory, std::size_t bytes) {
  auto* to = static_cast<std::uint8_t*>(to_memory);
  const auto* from = static_cast<const std::uint8_t*>(from_memory);
  if (bytes > 64) {
    std::memcpy(to, from, bytes);
  } else if (bytes >= 16) {  // 16-byte pieces, the last one overlapping the one before
    for (std::size_t i = 0; i + 16 < bytes; i += 16) std::memcpy(to + i, from + i, 16);
    std::memcpy(to + bytes - 16, from + bytes - 16, 16);
  } else if (bytes >= 8) {
    std::memcpy(to, from, 8);
    std::memcpy(to + bytes - 8, from + bytes - 8, 8);
  } else if (bytes >= 4) {
    std::memcpy(to, from, 4);
    std::memcpy(to + bytes - 4, from + bytes - 4, 4);
  } else if (bytes > 0) {
    to[0] = from[0];
    to[bytes / 2] = from[bytes / 2];
    to[bytes - 1] = from[bytes - 1];
  }
}

}  // namespace comm::detail
