// torch.distributed's ProcessGroup (torch 1.13's plugin interface) over a libcomm group: every
// operation of the interface on CPU tensors (and CUDA tensors where torch has CUDA), each issued
// as libcomm's asynchronous form and returned as a LibcommWork.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace torch_libcomm {

class LibcommProcessGroup final : public c10d::ProcessGroup {
 public:
  explicit LibcommProcessGroup(std::shared_ptr<comm::ProcessGroup> group);
  const std::string getBackendName() const override { return "libcomm"; }

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
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& options) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& options) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
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

 private:
  c10::intrusive_ptr<c10d::Work> make_work(c10d::OpType type, std::vector<std::shared_ptr<comm::Work>> works,
                                           std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive = {});
  // All-to-all with uneven blocks: one send and one receive per peer (libcomm's all_to_all
  // moves equal blocks); this rank's own block is copied. On tags from 2^30 up, which torch
  // programs' own send/recv are not expected to use.
  std::vector<std::shared_ptr<comm::Work>> exchange_blocks(const std::vector<at::Tensor>& sends,
                                                           const std::vector<at::Tensor>& receives,
                                                           const char* operation);

  std::shared_ptr<comm::ProcessGroup> group_;
  std::atomic<int> exchange_sequence_{0};
};

}  // namespace torch_libcomm
