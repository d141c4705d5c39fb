// What a process of multicast discovery announces (rendezvous/multicast_discovery.hpp), as text
// in one UDP datagram:
//
//   libcomm-discovery 2 ID WORLD PORT GROUP TIME SEQUENCE ADDRESS VIEW STATE PROOF
//
// ID: the process's random id (16 hex digits); WORLD: the world size; PORT: its store's port (0
// until it serves one); GROUP: the group name in hex; TIME: the sender's clock (ms since the
// epoch); SEQUENCE: its announcements' count; ADDRESS: its own address once it has heard itself,
// else "-"; VIEW: what it has heard (16 hex digits); STATE: "ok", or "broken" once it found the
// group broken; PROOF: with a job secret, an HMAC of everything before it (64 hex digits), else
// "-". Parsed apart from the discovery so that a stranger's datagrams can be fuzzed on their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace comm {

inline constexpr std::size_t kAnnouncementIdDigits = 16;

struct Announcement {
  std::string id;
  int world_size = 0;
  std::uint16_t store_port = 0;
  std::string group_hex;
  std::int64_t sent_at_ms = 0;
  std::uint64_t sequence = 0;
  std::string address = "-";
  std::string view;
  bool broken = false;
};

// The VIEW field: what a process has heard, in 16 hex digits (FNV-1a over the sorted ids, its own
// among them). A process completes only when every member announces the same view as its own, so
// processes that heard different sets (two jobs under one name) never complete on a partial view.
std::string announcement_view(const std::vector<std::string>& sorted_ids);

// The announcement's text without the proof field (what the proof covers).
std::string announcement_text(const Announcement& announcement);

struct ParsedAnnouncement {
  Announcement announcement;
  std::string signed_part;  // the text the proof covers
  std::string proof;        // "-" or 64 hex digits
};

// The announcement in a datagram, or nothing when it is not one in this version's form (any
// field missing, malformed or out of range, or anything after the proof).
std::optional<ParsedAnnouncement> parse_announcement(std::string_view datagram);

}  // namespace comm
