#include "transport/media.hpp"

#include <array>

#include "comm/error.hpp"
#include "transport/memory/memory_stream.hpp"
#include "transport/shm/shm_medium.hpp"
#include "transport/tcp/tcp_medium.hpp"

namespace comm::transport {

// A list, not registrars in each medium's static initialisers: a medium's library is static,
// and the linker drops an object file nothing refers to, registrar and all.
std::span<const MediumEntry> media() {
  static const std::array entries = {
      shm_medium(),
      tcp_medium(),
      memory_medium(),
  };
  return entries;
}

const MediumEntry* parse_medium_choice(const std::string& text, const std::string& source) {
  if (text == "auto") return nullptr;
  std::string names = "auto";
  for (const auto& medium : media()) {
    if (text == medium.name) return &medium;
    names += std::string(", ") + medium.name;
  }
  throw InvalidArgumentError("transport '" + text + "' (" + source + ") is not one of " + names,
                             ErrorContext{.op = "init_process_group"});
}

}  // namespace comm::transport
