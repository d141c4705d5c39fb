// A store whose waits also watch the job's ranks. During init, ranks wait on each other through
// the store (for a shared-memory segment's name, for the others to finish); a rank that dies
// meanwhile would leave them waiting out the whole timeout. Here a wait is cut into slices, and
// between slices a check (given by the layer that can see the ranks: the mesh's sockets, the
// transport's state) throws the error that names the dead rank and what was going on.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "comm/store_interface.hpp"

namespace comm::transport {

class WatchedStore final : public Store {
 public:
  // `check` throws when a rank is known to be gone; it runs every `slice` while a wait lasts
  // (only while the keys are missing).
  WatchedStore(Store& inner, std::function<void()> check,
               std::chrono::milliseconds slice = std::chrono::milliseconds(100));
  std::string describe() const override { return inner_.describe(); }

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;
  bool do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) override;
  void do_withdraw_last_word(const std::string& key) override;

 private:
  Store& inner_;
  std::function<void()> check_;
  std::chrono::milliseconds slice_;
};

}  // namespace comm::transport
