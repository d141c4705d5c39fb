#include "torch_store.hpp"

#include "comm/error.hpp"

namespace torch_libcomm {
namespace {

std::vector<std::uint8_t> vector_of(std::span<const std::uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

TorchStore::TorchStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout)
    : comm::Store(timeout), store_(std::move(store)) {}

void TorchStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  store_->set(key, vector_of(value));
}

comm::Bytes TorchStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  do_wait({key}, timeout);
  auto value = store_->get(key);
  return comm::Bytes(value.begin(), value.end());
}

std::int64_t TorchStore::do_add(const std::string& key, std::int64_t delta) { return store_->add(key, delta); }

comm::Bytes TorchStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
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
  try {
    store_->wait(keys, timeout);
  } catch (const c10::Error&) {
    // torch's stores say only "Wait timeout"; name the keys the way every comm::Store does.
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!store_->check({key})) missing.push_back(key);
    }
    if (missing.empty()) throw;
    throw_timeout("store.wait", missing, timeout);
  }
}

bool TorchStore::do_check(const std::vector<std::string>& keys) { return store_->check(keys); }

bool TorchStore::do_delete_key(const std::string& key) { return store_->deleteKey(key); }

std::int64_t TorchStore::do_num_keys() { return store_->getNumKeys(); }

}  // namespace torch_libcomm
