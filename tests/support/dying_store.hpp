// A store for fault tests: it forwards every call, except that just before this process would
// set (or add to, or compare-and-set) the chosen key occurrence, it calls `die`: a point inside
// init or new_group that no outside timer could hit reliably.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/store.hpp"

namespace comm::testing {

class DyingStore final : public Store {
 public:
  // Dies at the `occurrence`-th key ending in `suffix` (no death when `suffix` is empty).
  DyingStore(std::shared_ptr<Store> inner, std::string suffix, std::function<void(const std::string&)> die,
             int occurrence = 1)
      : Store(inner->timeout()),
        inner_(std::move(inner)),
        suffix_(std::move(suffix)),
        die_(std::move(die)),
        occurrences_left_(occurrence) {}
  std::string describe() const override { return inner_->describe(); }
  bool serves_others() const override { return inner_->serves_others(); }

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override {
    maybe_die(key);
    inner_->set(key, value);
  }
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override { return inner_->get(key, timeout); }
  std::int64_t do_add(const std::string& key, std::int64_t delta) override {
    maybe_die(key);
    return inner_->add(key, delta);
  }
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override {
    maybe_die(key);
    return inner_->compare_set(key, expected, desired);
  }
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  bool do_check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  bool do_delete_key(const std::string& key) override { return inner_->delete_key(key); }
  std::int64_t do_num_keys() override { return inner_->num_keys(); }
  bool do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) override {
    return inner_->leave_last_word(key, value);
  }
  void do_withdraw_last_word(const std::string& key) override { inner_->withdraw_last_word(key); }

 private:
  void maybe_die(const std::string& key) {
    if (!suffix_.empty() && key.ends_with(suffix_) && --occurrences_left_ == 0) die_(key);
  }

  std::shared_ptr<Store> inner_;
  std::string suffix_;
  std::function<void(const std::string&)> die_;
  int occurrences_left_;
};

}  // namespace comm::testing
