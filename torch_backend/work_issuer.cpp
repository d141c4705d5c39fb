#include "work_issuer.hpp"

#include "libcomm_work.hpp"

namespace torch_libcomm {

WorkIssuer::WorkIssuer(int rank, std::chrono::milliseconds group_timeout, std::chrono::milliseconds timeout)
    : rank_(rank), group_timeout_(group_timeout), timeout_ms_(timeout.count()) {}

std::chrono::milliseconds WorkIssuer::work_timeout() const {
  // The group's own timeout is libcomm's to enforce (0 to the Work): its error names the late rank.
  auto timeout = this->timeout();
  return timeout == group_timeout_ ? std::chrono::milliseconds(0) : timeout;
}

void WorkIssuer::record_if_coalescing(const WorkList& works, const std::vector<at::Tensor>& outputs,
                                      const std::vector<at::Tensor>& keep_alive) {
  std::lock_guard lock(coalescing_mutex_);
  if (!coalescing_) return;
  coalesced_works_.insert(coalesced_works_.end(), works.begin(), works.end());
  coalesced_outputs_.insert(coalesced_outputs_.end(), outputs.begin(), outputs.end());
  coalesced_keep_alive_.insert(coalesced_keep_alive_.end(), keep_alive.begin(), keep_alive.end());
}

c10::intrusive_ptr<c10d::Work> WorkIssuer::collective(c10d::OpType type, WorkList works,
                                                      std::vector<at::Tensor> outputs,
                                                      std::vector<at::Tensor> keep_alive,
                                                      std::chrono::milliseconds timeout) {
  ++sequence_;
  record_if_coalescing(works, outputs, keep_alive);
  return c10::make_intrusive<LibcommWork>(rank_, type, std::move(works), std::move(outputs), std::move(keep_alive),
                                          timeout == c10d::kUnsetTimeout ? work_timeout() : timeout);
}

c10::intrusive_ptr<c10d::Work> WorkIssuer::point_to_point(c10d::OpType type, WorkList works,
                                                          std::vector<at::Tensor> outputs,
                                                          std::vector<at::Tensor> keep_alive) {
  record_if_coalescing(works, outputs, keep_alive);
  return c10::make_intrusive<LibcommWork>(rank_, type, std::move(works), std::move(outputs), std::move(keep_alive),
                                          work_timeout());
}

// Every operation is issued at once, asynchronously, so a coalesced batch is already as
// concurrent as libcomm makes it; coalescing collects the batch's Works into one.
void WorkIssuer::start_coalescing() {
  std::lock_guard lock(coalescing_mutex_);
  TORCH_CHECK(!coalescing_, "ProcessGroup libcomm: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> WorkIssuer::end_coalescing() {
  std::lock_guard lock(coalescing_mutex_);
  TORCH_CHECK(coalescing_, "ProcessGroup libcomm: endCoalescing without startCoalescing");
  coalescing_ = false;
  auto work =
      c10::make_intrusive<LibcommWork>(rank_, c10d::OpType::COALESCED, std::move(coalesced_works_),
                                       std::move(coalesced_outputs_), std::move(coalesced_keep_alive_), work_timeout());
  coalesced_works_ = {};
  coalesced_outputs_ = {};
  coalesced_keep_alive_ = {};
  return work;
}

}  // namespace torch_libcomm
