// HashStore: a map behind one mutex; waiters sleep on a condition variable woken by every
// change that creates a key.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "comm/store.hpp"
#include "rendezvous/store_format.hpp"

namespace comm {

struct HashStore::State {
  std::mutex mutex;
  std::condition_variable key_added;
  std::unordered_map<std::string, Bytes> values;

  const Bytes* find(const std::string& key) const { return store_format::find_value(values, key); }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    return store_format::missing_keys(values, keys);
  }
  void store(const std::string& key, Bytes value) {
    values[key] = std::move(value);
    key_added.notify_all();
  }
};

HashStore::HashStore(std::chrono::milliseconds timeout) : Store(timeout), state_(std::make_unique<State>()) {}

HashStore::~HashStore() = default;

void HashStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  std::lock_guard lock(state_->mutex);
  state_->store(key, Bytes(value.begin(), value.end()));
}

Bytes HashStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  wait_for({key}, timeout, "store.get");
  std::lock_guard lock(state_->mutex);
  const Bytes* value = state_->find(key);
  if (value == nullptr) throw_timeout("store.get", {key}, timeout);  // deleted meanwhile
  return *value;
}

std::int64_t HashStore::do_add(const std::string& key, std::int64_t delta) {
  std::lock_guard lock(state_->mutex);
  std::int64_t value = store_format::added_counter(key, state_->find(key), delta);
  state_->store(key, store_format::encode_counter(value));
  return value;
}

Bytes HashStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                std::span<const std::uint8_t> desired) {
  std::lock_guard lock(state_->mutex);
  return store_format::compare_and_set(state_->find(key), expected, desired,
                                       [&](const Bytes& value) { state_->store(key, value); });
}

void HashStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  wait_for(keys, timeout, "store.wait");
}

void HashStore::wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const char* op) {
  std::unique_lock lock(state_->mutex);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool all_present = state_->key_added.wait_until(lock, deadline, [&] { return state_->missing(keys).empty(); });
  if (!all_present) throw_timeout(op, state_->missing(keys), timeout);
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard lock(state_->mutex);
  return state_->missing(keys).empty();
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->values.erase(key) > 0;
}

std::int64_t HashStore::do_num_keys() {
  std::lock_guard lock(state_->mutex);
  return static_cast<std::int64_t>(state_->values.size());
}

}  // namespace comm
