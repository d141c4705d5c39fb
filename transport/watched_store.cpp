#include "transport/watched_store.hpp"

#include <algorithm>

namespace comm::transport {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

WatchedStore::WatchedStore(Store& inner, std::function<void()> check, std::chrono::milliseconds slice)
    : Store(inner.timeout()), inner_(inner), check_(std::move(check)), slice_(slice) {}

void WatchedStore::do_set(const std::string& key, std::span<const std::uint8_t> value) { inner_.set(key, value); }

Bytes WatchedStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  do_wait({key}, timeout);
  return inner_.get(key, timeout);
}

std::int64_t WatchedStore::do_add(const std::string& key, std::int64_t delta) { return inner_.add(key, delta); }

Bytes WatchedStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                   std::span<const std::uint8_t> desired) {
  return inner_.compare_set(key, expected, desired);
}

void WatchedStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      return inner_.wait(keys, std::clamp(left, std::chrono::milliseconds(0), slice_));
    } catch (const TimeoutError&) {
    } catch (const IoError&) {
      // The store is gone, likely with the rank that hosted it, after a failure of its own:
      // the ranks may still say who died first.
      check_();
      throw;
    }
    // Look at the ranks only while the keys are missing: a rank that has done its part (set
    // the key) may leave, and that is no failure.
    if (inner_.check(keys)) return;
    check_();
    if (Clock::now() < deadline) continue;
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!inner_.check({key})) missing.push_back(key);
    }
    throw_timeout("store.wait", missing, timeout);
  }
}

bool WatchedStore::do_check(const std::vector<std::string>& keys) { return inner_.check(keys); }

bool WatchedStore::do_delete_key(const std::string& key) { return inner_.delete_key(key); }

std::int64_t WatchedStore::do_num_keys() { return inner_.num_keys(); }

bool WatchedStore::do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) {
  return inner_.leave_last_word(key, value);
}

void WatchedStore::do_withdraw_last_word(const std::string& key) { inner_.withdraw_last_word(key); }

}  // namespace comm::transport
