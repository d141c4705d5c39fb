// Test support: a store that hands every operation to an in-process HashStore, for tests that
// watch or hold back some operations (override those, call the base for the rest).
#pragma once

#include <string>
#include <vector>

#include "comm/store.hpp"

namespace comm::testing {

class ForwardingStore : public Store {
 public:
  std::string describe() const override { return "ForwardingStore"; }
  HashStore inner;

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override { inner.set(key, value); }
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override { return inner.get(key, timeout); }
  std::int64_t do_add(const std::string& key, std::int64_t delta) override { return inner.add(key, delta); }
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override {
    return inner.compare_set(key, expected, desired);
  }
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner.wait(keys, timeout);
  }
  bool do_check(const std::vector<std::string>& keys) override { return inner.check(keys); }
  bool do_delete_key(const std::string& key) override { return inner.delete_key(key); }
  std::int64_t do_num_keys() override { return inner.num_keys(); }
};

}  // namespace comm::testing
