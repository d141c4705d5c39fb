// PrefixStore: rewrites keys and forwards; the underlying store enforces limits and timeouts.
#include "comm/store.hpp"
#include "libcomm/base/check.hpp"

namespace comm {

struct PrefixStore::Parts {
  std::string prefix;
  std::shared_ptr<Store> store;

  std::string prefixed(const std::string& key) const { return prefix + "/" + key; }
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> result;
    result.reserve(keys.size());
    for (const auto& key : keys) result.push_back(prefixed(key));
    return result;
  }
};

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout),
      parts_(std::make_unique<Parts>(Parts{std::move(prefix), std::move(store)})) {
  COMM_CHECK(parts_->store != nullptr, InvalidArgumentError, ErrorContext{.op = "PrefixStore"},
             "PrefixStore needs an underlying store, got a null pointer");
}

PrefixStore::~PrefixStore() = default;

const std::shared_ptr<Store>& PrefixStore::underlying() const { return parts_->store; }

bool PrefixStore::serves_others() const { return parts_->store->serves_others(); }

std::string PrefixStore::describe() const { return parts_->store->describe() + " (prefix '" + parts_->prefix + "/')"; }

void PrefixStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  parts_->store->set(parts_->prefixed(key), value);
}

Bytes PrefixStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  return parts_->store->get(parts_->prefixed(key), timeout);
}

std::int64_t PrefixStore::do_add(const std::string& key, std::int64_t delta) {
  return parts_->store->add(parts_->prefixed(key), delta);
}

Bytes PrefixStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                  std::span<const std::uint8_t> desired) {
  return parts_->store->compare_set(parts_->prefixed(key), expected, desired);
}

void PrefixStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  parts_->store->wait(parts_->prefixed(keys), timeout);
}

bool PrefixStore::do_check(const std::vector<std::string>& keys) {
  return parts_->store->check(parts_->prefixed(keys));
}

bool PrefixStore::do_delete_key(const std::string& key) { return parts_->store->delete_key(parts_->prefixed(key)); }

std::int64_t PrefixStore::do_num_keys() { return parts_->store->num_keys(); }

bool PrefixStore::do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) {
  return parts_->store->leave_last_word(parts_->prefixed(key), value);
}

void PrefixStore::do_withdraw_last_word(const std::string& key) {
  parts_->store->withdraw_last_word(parts_->prefixed(key));
}

}  // namespace comm
