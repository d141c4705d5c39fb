// The Store interface: the key-value contract every store keeps (comm/store.hpp has the stores
// themselves). Ranks bootstrap through it, and the layers below the API (transport, algorithms)
// see stores only through it, never a particular store.
//
// Every store is safe to use from several threads. Blocking calls (get, wait) end at the
// store's timeout with a TimeoutError that names the keys still missing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/error.hpp"

namespace comm {

using Bytes = std::vector<std::uint8_t>;

// Limits every store enforces (so a program behaves the same on each): larger keys or values
// are an InvalidArgumentError, and the TCP server drops a client whose frame claims more.
inline constexpr std::size_t kMaxStoreKeyBytes = 4096;
inline constexpr std::size_t kMaxStoreValueBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxStoreKeysPerCall = 65536;
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::minutes(5);
// Longer timeouts (milliseconds::max() as "forever", say) are capped to this.
inline constexpr std::chrono::milliseconds kMaxStoreTimeout = std::chrono::hours(24 * 365 * 10);

class Store {
 public:
  explicit Store(std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  virtual ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(std::string_view key, std::span<const std::uint8_t> value);
  void set(std::string_view key, std::string_view value);

  // Blocks until the key exists, then returns its value; TimeoutError after timeout().
  Bytes get(std::string_view key);
  Bytes get(std::string_view key, std::chrono::milliseconds timeout);
  std::string get_string(std::string_view key);

  // Adds delta to the integer stored at key (a missing key counts as 0) and returns the sum.
  // The value is stored as decimal text, so get() of a counter returns e.g. "42".
  std::int64_t add(std::string_view key, std::int64_t delta);

  // Atomically: if the key holds `expected` (or is missing and `expected` is empty), store
  // `desired`. Returns the value the key holds afterwards (for a missing key and a non-empty
  // `expected`: `expected`, as torch.distributed does).
  Bytes compare_set(std::string_view key, std::span<const std::uint8_t> expected,
                    std::span<const std::uint8_t> desired);
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired);

  // Blocks until every key exists; TimeoutError naming the missing ones.
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // True when every key exists; never blocks.
  bool check(const std::vector<std::string>& keys);
  // True when the key existed.
  bool delete_key(std::string_view key);
  std::int64_t num_keys();

  // A last word: should this process end, or lose its link to the store, before it withdraws
  // the word, the store itself writes `value` (not empty) under `key`, unless the key exists by
  // then. This is how the others learn at once that a process died before it could tell them
  // anything (init leaves one until its rank is connected to every other). Returns false, and
  // registers nothing, on a store that cannot notice a client ending (HashStore, FileStore).
  bool leave_last_word(std::string_view key, std::span<const std::uint8_t> value);
  bool leave_last_word(std::string_view key, std::string_view value);
  void withdraw_last_word(std::string_view key);

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout);

  // One line saying which store this is, for error messages ("TcpStore at 10.0.0.1:29500").
  virtual std::string describe() const = 0;
  // Whether this process serves the store to the others (a TcpStore with is_server): then
  // init_process_group keeps it up until every rank is through, whoever created it.
  virtual bool serves_others() const { return false; }

 protected:
  // Implementations receive validated arguments; they must be thread-safe.
  virtual void do_set(const std::string& key, std::span<const std::uint8_t> value) = 0;
  virtual Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual std::int64_t do_add(const std::string& key, std::int64_t delta) = 0;
  virtual Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                               std::span<const std::uint8_t> desired) = 0;
  virtual void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual bool do_delete_key(const std::string& key) = 0;
  virtual std::int64_t do_num_keys() = 0;
  virtual bool do_leave_last_word(const std::string& /*key*/, std::span<const std::uint8_t> /*value*/) { return false; }
  virtual void do_withdraw_last_word(const std::string& /*key*/) {}

  // The TimeoutError every store throws when a get or wait runs out of time.
  [[noreturn]] void throw_timeout(const char* op, const std::vector<std::string>& missing,
                                  std::chrono::milliseconds timeout) const;

 private:
  std::chrono::milliseconds timeout_;
};

}  // namespace comm
