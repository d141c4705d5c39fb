// PreparedCall: a collective made ready once (ProcessGroup::Impl::make_ready: checked, its
// algorithm chosen, fingerprinted) and run many times, each run numbered as it starts. The Call
// is kept with its blocks and algorithm name, which the caller's may not outlive; transfers and
// calls on GPU buffers (whose stream may change between runs) go the ordinary way at each run.
#include "comm/prepared_call.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/src/call_checks.hpp"
#include "libcomm/src/group.hpp"

namespace comm {

class PreparedCall::Impl {
 public:
  Impl(ProcessGroup::Impl& group, const Call& call)
      : group_(group),
        lifetime_(group.lifetime()),
        rank_(group.rank()),
        blocks_(call.blocks.begin(), call.blocks.end()),
        algorithm_(call.algorithm),
        call_(call) {
    call_.blocks = blocks_;
    call_.algorithm = algorithm_;
    bool transfer = call.operation == Operation::Send || call.operation == Operation::Recv;
    if (!transfer && device_of(call_).kind != Device::Kind::Cuda) {
      ready_ = std::make_shared<const ProcessGroup::Impl::ReadyCall>(group.make_ready(call_));
    }
  }

  void run() {
    ProcessGroup::Impl& group = live_group();
    if (ready_) {
      group.run_ready(*ready_);
    } else {
      group.run(call_);
    }
  }

  std::shared_ptr<Work> start() {
    ProcessGroup::Impl& group = live_group();
    return ready_ ? group.start_ready(ready_) : group.start(call_);
  }

 private:
  ProcessGroup::Impl& live_group() const {
    COMM_CHECK(!lifetime_.expired(), InvalidArgumentError,
               (ErrorContext{.rank = rank_, .op = to_string(call_.operation)}),
               "this prepared call's process group was destroyed: prepare the call again on a live group");
    return group_;
  }

  ProcessGroup::Impl& group_;
  std::weak_ptr<const int> lifetime_;
  int rank_;
  std::vector<Buffer> blocks_;
  std::string algorithm_;
  Call call_;
  std::shared_ptr<const ProcessGroup::Impl::ReadyCall> ready_;  // null: made ready at each run
};

PreparedCall::PreparedCall(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedCall::~PreparedCall() = default;
void PreparedCall::run() { impl_->run(); }
std::shared_ptr<Work> PreparedCall::start() { return impl_->start(); }

std::shared_ptr<PreparedCall> ProcessGroup::prepare(const Call& call) {
  return std::make_shared<PreparedCall>(std::make_unique<PreparedCall::Impl>(*impl_, call));
}

}  // namespace comm
