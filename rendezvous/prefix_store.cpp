// PrefixStore: rewrites keys and forwards; the underlying store enforces limits and timeouts.
#include "comm/store.hpp"
#include "libcomm/base/check.hpp"

namespace comm {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), store_(std::move(store)) {
  COMM_CHECK(store_ != nullptr, InvalidArgumentError, ErrorContext{.op = "PrefixStore"},
             "PrefixStore needs an underlying store, got a null pointer");
}

std::string PrefixStore::describe() const { return store_->describe() + " (prefix '" + prefix_ + "/')"; }

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> result;
  result.reserve(keys.size());
  for (const auto& key : keys) result.push_back(prefixed(key));
  return result;
}

void PrefixStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  store_->set(prefixed(key), value);
}

Bytes PrefixStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  return store_->get(prefixed(key), timeout);
}

std::int64_t PrefixStore::do_add(const std::string& key, std::int64_t delta) {
  return store_->add(prefixed(key), delta);
}

Bytes PrefixStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                  std::span<const std::uint8_t> desired) {
  return store_->compare_set(prefixed(key), expected, desired);
}

void PrefixStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}

bool PrefixStore::do_check(const std::vector<std::string>& keys) { return store_->check(prefixed(keys)); }

bool PrefixStore::do_delete_key(const std::string& key) { return store_->delete_key(prefixed(key)); }

std::int64_t PrefixStore::do_num_keys() { return store_->num_keys(); }

bool PrefixStore::do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) {
  return store_->leave_last_word(prefixed(key), value);
}

void PrefixStore::do_withdraw_last_word(const std::string& key) { store_->withdraw_last_word(prefixed(key)); }

}  // namespace comm
