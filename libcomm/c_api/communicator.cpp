#include "libcomm/c_api/communicator.hpp"

#include <algorithm>

#include "libcomm/c_api/results.hpp"

void comm_communicator::ready(std::shared_ptr<comm::ProcessGroup> group) {
  std::shared_ptr<comm::ProcessGroup> unwanted;  // a non-blocking init that outlived its communicator
  {
    std::lock_guard lock(mutex_);
    init_finished_ = true;
    if (ended() != End::kLive) {
      unwanted = std::move(group);
    } else {
      group_ = std::move(group);
      ready_group_.store(group_.get(), std::memory_order_release);
    }
    // An abort during a non-blocking init has already decided the outcome.
    comm_result_t expected = COMM_IN_PROGRESS;
    async_error_.compare_exchange_strong(expected, COMM_SUCCESS);
  }
  initialized_.notify_all();
  if (unwanted && ended() == End::kAborted) unwanted->abort();
}

void comm_communicator::failed(comm_result_t code) {
  {
    std::lock_guard lock(mutex_);
    init_finished_ = true;
    comm_result_t expected = COMM_IN_PROGRESS;
    async_error_.compare_exchange_strong(expected, code);
  }
  initialized_.notify_all();
}

comm::ProcessGroup& comm_communicator::wait_for_group() {
  std::unique_lock lock(mutex_);
  initialized_.wait(lock, [this] { return init_finished_ || ended() != End::kLive; });
  if (!group_) {
    if (ended() != End::kLive) {
      lock.unlock();
      comm::c_api::require_live(this);
    }
    throw comm::c_api::CallError(COMM_INVALID_USAGE, async_error_.load() == COMM_SUCCESS
                                                         ? "this communicator was aborted or destroyed"
                                                         : "this communicator's init failed (" + last_error_ +
                                                               "); destroy it and make a new one");
  }
  return *group_;
}

std::shared_ptr<comm::ProcessGroup> comm_communicator::end(End how) {
  std::shared_ptr<void> store;  // let go outside the lock: stopping a hosted store joins its thread
  std::shared_ptr<comm::ProcessGroup> group;
  {
    std::lock_guard lock(mutex_);
    End expected = End::kLive;
    if (!ended_.compare_exchange_strong(expected, how)) comm::c_api::require_live(this);  // says how it ended
    ready_group_.store(nullptr, std::memory_order_release);
    group = std::move(group_);
    store = std::move(hosted_store);
    last_error_ = how == End::kAborted ? "this communicator was aborted (comm_abort)"
                                       : "this communicator was destroyed (comm_destroy)";
  }
  initialized_.notify_all();  // a caller waiting for a non-blocking init sees the end
  return group;
}

namespace comm::c_api {

void require_live(const comm_communicator* comm) {
  switch (comm->ended()) {
    case comm_communicator::End::kLive: return;
    case comm_communicator::End::kDestroyed:
      throw CallError(COMM_INVALID_ARGUMENT,
                      "this communicator was destroyed (comm_destroy); make a new one with comm_init_rank");
    case comm_communicator::End::kAborted:
      throw CallError(COMM_INVALID_ARGUMENT,
                      "this communicator was aborted (comm_abort); make a new one with comm_init_rank");
  }
}

}  // namespace comm::c_api

void comm_communicator::set_async_error(comm_result_t code) {
  comm_result_t expected = COMM_SUCCESS;
  async_error_.compare_exchange_strong(expected, code);
}

void comm_communicator::set_last_error(std::string message) {
  std::lock_guard lock(mutex_);
  last_error_ = std::move(message);
}

const char* comm_communicator::last_error() {
  std::lock_guard lock(mutex_);
  return last_error_.c_str();
}

