#include "rendezvous/multicast_announcement.hpp"

#include <array>
#include <charconv>
#include <vector>

#include "libcomm/base/job_secret.hpp"

namespace comm {
namespace {

constexpr std::string_view kMagic = "libcomm-discovery";
constexpr int kVersion = 2;
constexpr std::size_t kFields = 12;
// Group names are at most 256 bytes (512 hex digits); addresses at most an IPv6 one with a scope.
constexpr std::size_t kMaximumGroupHex = 512;
constexpr std::size_t kMaximumAddress = 80;
// Times past this (year ~2100) are not a clock's: refused, so that no difference overflows.
constexpr std::int64_t kLatestTime = std::int64_t{1} << 42;
constexpr int kLargestWorld = 1 << 24;

bool is_lower_hex(std::string_view text) {
  return text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

template <class Number>
bool read_number(std::string_view text, Number& value) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;  // one spelling per number
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string announcement_view(const std::vector<std::string>& sorted_ids) {
  std::uint64_t hash = 14695981039346656037ull;
  auto mix = [&](char c) { hash = (hash ^ static_cast<std::uint8_t>(c)) * 1099511628211ull; };
  for (const auto& id : sorted_ids) {
    for (char c : id) mix(c);
    mix(' ');
  }
  std::array<std::uint8_t, 8> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(hash >> (56 - 8 * i));
  return hex_text(bytes);
}

std::string announcement_text(const Announcement& announcement) {
  return std::string(kMagic) + " " + std::to_string(kVersion) + " " + announcement.id + " " +
         std::to_string(announcement.world_size) + " " + std::to_string(announcement.store_port) + " " +
         announcement.group_hex + " " + std::to_string(announcement.sent_at_ms) + " " +
         std::to_string(announcement.sequence) + " " + announcement.address + " " + announcement.view + " " +
         (announcement.broken ? "broken" : "ok");
}

std::optional<ParsedAnnouncement> parse_announcement(std::string_view datagram) {
  std::vector<std::string_view> fields;
  for (std::size_t at = 0; at <= datagram.size() && fields.size() <= kFields;) {
    std::size_t space = datagram.find(' ', at);
    if (space == std::string_view::npos) space = datagram.size();
    fields.push_back(datagram.substr(at, space - at));
    at = space + 1;
  }
  if (fields.size() != kFields || fields[0] != kMagic || fields[1] != "2") return std::nullopt;
  ParsedAnnouncement parsed;
  Announcement& out = parsed.announcement;
  unsigned port = 0;
  if (fields[2].size() != kAnnouncementIdDigits || !is_lower_hex(fields[2])) return std::nullopt;
  if (!read_number(fields[3], out.world_size) || out.world_size < 1 || out.world_size > kLargestWorld) {
    return std::nullopt;
  }
  if (!read_number(fields[4], port) || port > 65535) return std::nullopt;
  if (fields[5].empty() || fields[5].size() > kMaximumGroupHex || fields[5].size() % 2 != 0 || !is_lower_hex(fields[5]))
    return std::nullopt;
  if (!read_number(fields[6], out.sent_at_ms) || out.sent_at_ms <= 0 || out.sent_at_ms > kLatestTime) {
    return std::nullopt;
  }
  if (!read_number(fields[7], out.sequence) || out.sequence == 0) return std::nullopt;
  if (fields[8].empty() || fields[8].size() > kMaximumAddress) return std::nullopt;
  if (fields[9].size() != kAnnouncementIdDigits || !is_lower_hex(fields[9])) return std::nullopt;
  if (fields[10] != "ok" && fields[10] != "broken") return std::nullopt;
  if (fields[11] != "-" && (fields[11].size() != 64 || !is_lower_hex(fields[11]))) return std::nullopt;
  out.id = fields[2];
  out.store_port = static_cast<std::uint16_t>(port);
  out.group_hex = fields[5];
  out.address = fields[8];
  out.view = fields[9];
  out.broken = fields[10] == "broken";
  parsed.proof = fields[11];
  parsed.signed_part = datagram.substr(0, static_cast<std::size_t>(fields[11].data() - datagram.data()) - 1);
  // One spelling per announcement: what is signed must read back as what was parsed.
  if (announcement_text(out) != parsed.signed_part) return std::nullopt;
  return parsed;
}

}  // namespace comm
