// torch.distributed's Backend (torch 2.x's c10d::Backend) over a libcomm group: every operation
// of the interface on CPU tensors (and CUDA tensors where torch has CUDA), each issued as
// libcomm's asynchronous form and handed to torch by a WorkIssuer; coalescing, splitting (a libcomm
// subgroup over the same connections), shrinking (torch.distributed.shrink_group: libcomm's
// shrink, docs/recovery.md), abort and shutdown, sequence numbers and timeouts.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "work_issuer.hpp"

namespace torch_libcomm {

class LibcommBackend final : public c10d::Backend {
 public:
  LibcommBackend(std::shared_ptr<comm::ProcessGroup> group, std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "libcomm"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  bool supportsShrinking() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& options) override;
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                           const c10::intrusive_ptr<Options>& options) override;
  void abort() override;
  void shutdown() override;

  // torch_libcomm.shrink: libcomm's shrink, no list needed (the survivors agree on who is out,
  // `exclude` and every rank found dead); the new backend and the survivors' ranks in this group.
  std::pair<c10::intrusive_ptr<LibcommBackend>, std::vector<int>> shrink_to_survivors(std::vector<int> exclude);
  // torch_libcomm.grow: libcomm's grow, `count` newcomers joining (their init_process_group
  // finds COMM_JOIN set).
  c10::intrusive_ptr<LibcommBackend> grow(int count);

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& options) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& options) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& options) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& options) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& options) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& options) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int destination, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int source, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& options) override;
  void monitoredBarrier(const c10d::BarrierOptions& options, bool wait_all_ranks) override;

 private:
  // The group, or an error in torch's words once the backend was shut down.
  std::shared_ptr<comm::ProcessGroup> group(const char* operation) const;
  // libcomm's shrink of the group, which succeeds it as the world if it was the world.
  std::shared_ptr<comm::ProcessGroup> shrunk_group(std::vector<int> exclude);

  mutable std::mutex group_mutex_;
  std::shared_ptr<comm::ProcessGroup> group_;  // null once shut down
  WorkIssuer works_;
  std::atomic<int> exchange_sequence_{0};
  std::atomic<int> split_count_{0};
  std::mutex splits_mutex_;
  std::map<std::string, c10::weak_intrusive_ptr<LibcommBackend>> splits_;  // by key

  std::mutex monitored_tokens_mutex_;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> monitored_tokens_;  // see monitoredBarrier
};

}  // namespace torch_libcomm
