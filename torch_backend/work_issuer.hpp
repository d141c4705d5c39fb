// How the backend hands torch its Works: each libcomm operation's Works wrapped as one
// LibcommWork under the right timeout, collectives counted in the group's sequence number, and
// everything issued between startCoalescing and endCoalescing collected into one batch.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/work.hpp"

namespace torch_libcomm {

using WorkList = std::vector<std::shared_ptr<comm::Work>>;

class WorkIssuer {
 public:
  // `group_timeout`: the one libcomm enforces itself (its errors name the late rank);
  // `timeout`: the backend's, which setTimeout changes.
  WorkIssuer(int rank, std::chrono::milliseconds group_timeout, std::chrono::milliseconds timeout);

  // A collective's Work, counted in the sequence number. `timeout`: the operation's own
  // (torch's kUnsetTimeout: the backend's).
  c10::intrusive_ptr<c10d::Work> collective(c10d::OpType type, WorkList works, std::vector<at::Tensor> outputs,
                                            std::vector<at::Tensor> keep_alive = {},
                                            std::chrono::milliseconds timeout = c10d::kUnsetTimeout);
  c10::intrusive_ptr<c10d::Work> point_to_point(c10d::OpType type, WorkList works, std::vector<at::Tensor> outputs,
                                                std::vector<at::Tensor> keep_alive);

  void start_coalescing();
  c10::intrusive_ptr<c10d::Work> end_coalescing();

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_.store(timeout.count()); }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  void reset_sequence() { sequence_.store(0); }
  std::uint64_t sequence() const { return sequence_.load(); }

 private:
  // How long a Work's wait() waits when the operation sets no timeout (0: libcomm's own).
  std::chrono::milliseconds work_timeout() const;
  void record_if_coalescing(const WorkList& works, const std::vector<at::Tensor>& outputs,
                            const std::vector<at::Tensor>& keep_alive);

  const int rank_;
  const std::chrono::milliseconds group_timeout_;
  std::atomic<std::int64_t> timeout_ms_;
  std::atomic<std::uint64_t> sequence_{0};

  std::mutex coalescing_mutex_;
  bool coalescing_ = false;
  WorkList coalesced_works_;
  std::vector<at::Tensor> coalesced_outputs_, coalesced_keep_alive_;
};

}  // namespace torch_libcomm
