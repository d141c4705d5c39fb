#include "torch_store.hpp"

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "comm/error.hpp"

namespace torch_libcomm {
namespace {

std::vector<std::uint8_t> vector_of(std::span<const std::uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

std::string message_of(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) return torch_error->what_without_backtrace();
  return error.what();
}

// torch's stores throw std::system_error ("Broken pipe") or c10::Error; libcomm's callers,
// its hang watch's thread among them, expect the comm::Error family, which says what to check.
template <class Call>
auto translated(const char* operation, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const comm::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw comm::IoError("torch.distributed's store failed: " + message_of(error) +
                            "; the process that hosts it (torch's rank 0, or torchrun's agent) may have exited",
                        comm::ErrorContext{.op = operation});
  }
}

}  // namespace

TorchStore::TorchStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout)
    : comm::Store(timeout), store_(std::move(store)) {}

void TorchStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  translated("store.set", [&] { store_->set(key, vector_of(value)); });
}

comm::Bytes TorchStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  do_wait({key}, timeout);
  auto value = translated("store.get", [&] { return store_->get(key); });
  return comm::Bytes(value.begin(), value.end());
}

std::int64_t TorchStore::do_add(const std::string& key, std::int64_t delta) {
  return translated("store.add", [&] { return store_->add(key, delta); });
}

comm::Bytes TorchStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                       std::span<const std::uint8_t> desired) {
  return translated("store.compare_set", [&] { return compare_set_and_wake(key, expected, desired); });
}

comm::Bytes TorchStore::compare_set_and_wake(const std::string& key, std::span<const std::uint8_t> expected,
                                             std::span<const std::uint8_t> desired) {
  auto result = store_->compareSet(key, vector_of(expected), vector_of(desired));
  // torch 1.13's TCPStore wakes no waiter on compareSet, only on set: a rank blocked in get()
  // on this key would sleep until its timeout. The winner sets the value it stored once more.
  bool stored_here = std::equal(result.begin(), result.end(), desired.begin(), desired.end()) &&
                     !std::equal(expected.begin(), expected.end(), desired.begin(), desired.end());
  if (stored_here) store_->set(key, result);
  return comm::Bytes(result.begin(), result.end());
}

void TorchStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  translated("store.wait", [&] {
    try {
      store_->wait(keys, timeout);
    } catch (const c10::Error&) {
      // torch's stores say only "Wait timeout"; name the keys the way every comm::Store does.
      std::vector<std::string> missing;
      for (const auto& key : keys) {
        if (!store_->check({key})) missing.push_back(key);
      }
      // Set between the timeout and the look: the wait is over, as it would have been a moment
      // later. (Rethrowing here made a WatchedStore's 100 ms slice fail init under load.)
      if (missing.empty()) return;
      throw_timeout("store.wait", missing, timeout);
    }
  });
}

bool TorchStore::do_check(const std::vector<std::string>& keys) {
  return translated("store.check", [&] { return store_->check(keys); });
}

bool TorchStore::do_delete_key(const std::string& key) {
  return translated("store.delete_key", [&] { return store_->deleteKey(key); });
}

std::int64_t TorchStore::do_num_keys() {
  return translated("store.num_keys", [&] { return store_->getNumKeys(); });
}

}  // namespace torch_libcomm
