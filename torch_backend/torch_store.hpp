// torch's c10d::Store as a comm::Store: the backend bootstraps libcomm over the store torch
// hands it (TCPStore, FileStore, PrefixStore, HashStore), so env://, tcp://, file://, store=,
// torchrun and mp.spawn need no second server or port.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>
#include <vector>

#include "comm/store_interface.hpp"

namespace torch_libcomm {

class TorchStore final : public comm::Store {
 public:
  TorchStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout);
  std::string describe() const override { return "torch.distributed's store"; }

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  comm::Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  comm::Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                             std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;

 private:
  comm::Bytes compare_set_and_wake(const std::string& key, std::span<const std::uint8_t> expected,
                                   std::span<const std::uint8_t> desired);

  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace torch_libcomm
