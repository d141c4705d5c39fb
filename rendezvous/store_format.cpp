#include "rendezvous/store_format.hpp"

#include <charconv>
#include <cstdio>

#include "comm/error.hpp"

namespace comm::store_format {

std::string key_list(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 16;
  std::string text;
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += "'" + keys[i] + "'";
  }
  if (keys.size() > kShown) text += " and " + std::to_string(keys.size() - kShown) + " more";
  return text;
}

Bytes encode_counter(std::int64_t value) {
  std::string text = std::to_string(value);
  return {text.begin(), text.end()};
}

std::optional<std::int64_t> decode_counter(std::span<const std::uint8_t> bytes) {
  const char* begin = reinterpret_cast<const char*>(bytes.data());
  const char* end = begin + bytes.size();
  std::int64_t value = 0;
  auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop != end || bytes.empty()) return std::nullopt;
  return value;
}

std::int64_t added_counter(const std::string& key, const Bytes* current, std::int64_t delta) {
  std::int64_t value = 0;
  if (current != nullptr) {
    auto decoded = decode_counter(*current);
    if (!decoded) {
      throw InvalidArgumentError("key '" + key + "' holds " + std::to_string(current->size()) +
                                     " bytes that are not a decimal integer, so add() cannot "
                                     "count on it; use a separate key for counters",
                                 ErrorContext{.op = "store.add"});
    }
    value = *decoded;
  }
  // A counter past int64's range (a stranger adding 2^63, found by fuzz/store_server) is refused,
  // never wrapped.
  std::int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    throw InvalidArgumentError("adding " + std::to_string(delta) + " to key '" + key + "' (" + std::to_string(value) +
                                   ") would pass the range of a 64-bit counter",
                               ErrorContext{.op = "store.add"});
  }
  return sum;
}

}  // namespace comm::store_format
