// Small text helpers shared by the stores: how keys, durations and counters are written.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/store.hpp"

namespace comm::store_format {

// "'a', 'b', 'c'" (at most the first 16, then "and N more").
std::string key_list(const std::vector<std::string>& keys);

// Counters are stored as decimal text, as torch.distributed's stores do.
Bytes encode_counter(std::int64_t value);
// Nothing when the bytes are not a decimal integer.
std::optional<std::int64_t> decode_counter(std::span<const std::uint8_t> bytes);

// Lookups every map-backed store needs (std::map and std::unordered_map alike).
template <class Map>
const Bytes* find_value(const Map& values, const std::string& key) {
  auto found = values.find(key);
  return found == values.end() ? nullptr : &found->second;
}

template <class Map>
std::vector<std::string> missing_keys(const Map& values, const std::vector<std::string>& keys) {
  std::vector<std::string> result;
  for (const auto& key : keys) {
    if (!values.contains(key)) result.push_back(key);
  }
  return result;
}

// The shared rule of add(): the new counter value, or InvalidArgumentError when the key holds
// something that is not a counter.
std::int64_t added_counter(const std::string& key, const Bytes* current, std::int64_t delta);

// The shared rule of compare_set(): updates `current` (nullptr: key missing) through `store`
// when the expectation holds, and returns the value the caller reports back.
template <class StoreValue>
Bytes compare_and_set(const Bytes* current, std::span<const std::uint8_t> expected,
                      std::span<const std::uint8_t> desired, StoreValue&& store_value) {
  if (current == nullptr) {
    if (!expected.empty()) return Bytes(expected.begin(), expected.end());
  } else if (!std::equal(current->begin(), current->end(), expected.begin(), expected.end())) {
    return *current;
  }
  Bytes value(desired.begin(), desired.end());
  store_value(value);
  return value;
}

}  // namespace comm::store_format
