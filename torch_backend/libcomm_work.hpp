// torch's Work over one or more libcomm Works. wait() waits on libcomm directly (the fast
// path of a blocking call); getFuture() asks libcomm to call back on completion, and one thread
// per process marks the Futures completed, off libcomm's threads and locks (torch's Future runs
// its callbacks, DDP's communication hooks among them, when it is marked).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/work.hpp"

namespace torch_libcomm {

class LibcommWork final : public c10d::Work {
 public:
  // `works`: what the operation is made of (all must complete); `outputs`: what result() and
  // the Future hold; `keep_alive`: tensors the operation reads or writes besides those (a
  // flattened input, say) that must outlive it; `timeout`: how long wait() without a timeout of
  // its own waits (the operation's timeout, or one set on the backend; 0: libcomm's own, the
  // group's, whose error names the late rank).
  LibcommWork(int rank, c10d::OpType type, std::vector<std::shared_ptr<comm::Work>> works,
              std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive, std::chrono::milliseconds timeout);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // On the completion thread, once every libcomm Work has completed.
  void complete_future();

 private:
  bool all_completed() const;
  // The outcome, once every libcomm Work is done: null, or the first failure.
  std::exception_ptr outcome() const;

  std::vector<std::shared_ptr<comm::Work>> works_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::chrono::milliseconds timeout_;
  std::once_flag future_requested_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<std::size_t> pending_{0};  // libcomm Works not yet called back
};

}  // namespace torch_libcomm
