// The validating front of every store: limits and timeouts are checked here once, so the
// implementations only ever see well-formed requests.
#include "comm/store.hpp"

#include <algorithm>
#include <sstream>

#include "libcomm/base/check.hpp"
#include "libcomm/base/duration_text.hpp"
#include "rendezvous/store_format.hpp"

namespace comm {
namespace {

std::span<const std::uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

void check_key(std::string_view key, const char* op) {
  COMM_CHECK(!key.empty(), InvalidArgumentError, ErrorContext{.op = op}, "store keys must not be empty");
  COMM_CHECK(key.size() <= kMaxStoreKeyBytes, InvalidArgumentError, ErrorContext{.op = op},
             "key of " + std::to_string(key.size()) + " bytes starting '" + std::string(key.substr(0, 32)) +
                 "...' is over the limit of " + std::to_string(kMaxStoreKeyBytes) + " bytes; use shorter keys");
}

void check_value(std::span<const std::uint8_t> value, const char* op) {
  COMM_CHECK(value.size() <= kMaxStoreValueBytes, InvalidArgumentError, ErrorContext{.op = op},
             "value of " + std::to_string(value.size()) + " bytes is over the store limit of " +
                 std::to_string(kMaxStoreValueBytes) +
                 " bytes; split it over several keys or send it through the process group");
}

void check_keys(const std::vector<std::string>& keys, const char* op) {
  COMM_CHECK(
      keys.size() <= kMaxStoreKeysPerCall, InvalidArgumentError, ErrorContext{.op = op},
      std::to_string(keys.size()) + " keys in one call is over the limit of " + std::to_string(kMaxStoreKeysPerCall));
  for (const auto& key : keys) check_key(key, op);
}

// Checks a timeout and caps it, so that "forever" (milliseconds::max()) cannot overflow a deadline.
std::chrono::milliseconds check_timeout(std::chrono::milliseconds timeout, const char* op) {
  COMM_CHECK(timeout.count() >= 0, InvalidArgumentError, ErrorContext{.op = op},
             "timeout must not be negative (got " + std::to_string(timeout.count()) + " ms)");
  return std::min(timeout, kMaxStoreTimeout);
}

}  // namespace

Store::Store(std::chrono::milliseconds timeout) : timeout_(check_timeout(timeout, "store")) {}

Store::~Store() = default;

void Store::set_timeout(std::chrono::milliseconds timeout) { timeout_ = check_timeout(timeout, "store.set_timeout"); }

void Store::set(std::string_view key, std::span<const std::uint8_t> value) {
  check_key(key, "store.set");
  check_value(value, "store.set");
  do_set(std::string(key), value);
}

void Store::set(std::string_view key, std::string_view value) { set(key, as_bytes(value)); }

Bytes Store::get(std::string_view key) { return get(key, timeout_); }

Bytes Store::get(std::string_view key, std::chrono::milliseconds timeout) {
  check_key(key, "store.get");
  return do_get(std::string(key), check_timeout(timeout, "store.get"));
}

std::string Store::get_string(std::string_view key) {
  Bytes value = get(key);
  return {value.begin(), value.end()};
}

std::int64_t Store::add(std::string_view key, std::int64_t delta) {
  check_key(key, "store.add");
  return do_add(std::string(key), delta);
}

Bytes Store::compare_set(std::string_view key, std::span<const std::uint8_t> expected,
                         std::span<const std::uint8_t> desired) {
  check_key(key, "store.compare_set");
  check_value(expected, "store.compare_set");
  check_value(desired, "store.compare_set");
  return do_compare_set(std::string(key), expected, desired);
}

std::string Store::compare_set(std::string_view key, std::string_view expected, std::string_view desired) {
  Bytes result = compare_set(key, as_bytes(expected), as_bytes(desired));
  return {result.begin(), result.end()};
}

void Store::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  check_keys(keys, "store.wait");
  timeout = check_timeout(timeout, "store.wait");
  if (!keys.empty()) do_wait(keys, timeout);
}

bool Store::check(const std::vector<std::string>& keys) {
  check_keys(keys, "store.check");
  return keys.empty() || do_check(keys);
}

bool Store::delete_key(std::string_view key) {
  check_key(key, "store.delete_key");
  return do_delete_key(std::string(key));
}

std::int64_t Store::num_keys() { return do_num_keys(); }

bool Store::leave_last_word(std::string_view key, std::span<const std::uint8_t> value) {
  check_key(key, "store.leave_last_word");
  check_value(value, "store.leave_last_word");
  COMM_CHECK(!value.empty(), InvalidArgumentError, ErrorContext{.op = "store.leave_last_word"},
             "a last word must not be empty");
  return do_leave_last_word(std::string(key), value);
}

bool Store::leave_last_word(std::string_view key, std::string_view value) {
  return leave_last_word(key, as_bytes(value));
}

void Store::withdraw_last_word(std::string_view key) {
  check_key(key, "store.withdraw_last_word");
  do_withdraw_last_word(std::string(key));
}

void Store::throw_timeout(const char* op, const std::vector<std::string>& missing,
                          std::chrono::milliseconds timeout) const {
  std::ostringstream message;
  message << "timed out after " << seconds_text(timeout) << " waiting for "
          << (missing.size() == 1 ? "key " : std::to_string(missing.size()) + " keys ")
          << store_format::key_list(missing) << " in " << describe()
          << "; the rank(s) expected to set them have not got that far (still starting, "
             "stuck, or dead): check their logs, or raise the timeout (COMM_TIMEOUT)";
  throw TimeoutError(message.str(), ErrorContext{.op = op});
}

}  // namespace comm
