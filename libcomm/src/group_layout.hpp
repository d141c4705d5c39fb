// Where a group sits inside the transport it shares with its parent (new_group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace comm {

struct GroupLayout {
  std::uint32_t id = 0;        // 0: the world group; tags carry it, so groups never cross-talk
  std::vector<int> members{};  // group rank -> transport rank; empty: the same numbering
  // false: the group makes no shared-memory segment, a collective step through the store (a
  // shrunk group: its store may have died with a rank)
  bool shared_segment = true;

  int transport_rank(int rank) const { return members.empty() ? rank : members[static_cast<std::size_t>(rank)]; }
};

}  // namespace comm
