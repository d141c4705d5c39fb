#include "libcomm/c_api/communicator.hpp"

#include <algorithm>

#include "libcomm/c_api/results.hpp"

void comm_communicator::ready(std::shared_ptr<comm::ProcessGroup> group) {
  {
    std::lock_guard lock(mutex_);
    group_ = std::move(group);
    ready_group_.store(group_.get(), std::memory_order_release);
    init_finished_ = true;
    // An abort during a non-blocking init has already decided the outcome.
    comm_result_t expected = COMM_IN_PROGRESS;
    async_error_.compare_exchange_strong(expected, COMM_SUCCESS);
  }
  initialized_.notify_all();
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
  initialized_.wait(lock, [this] { return init_finished_; });
  if (!group_) {
    throw comm::c_api::CallError(COMM_INVALID_USAGE, async_error_.load() == COMM_SUCCESS
                                                         ? "this communicator was aborted or destroyed"
                                                         : "this communicator's init failed (" + last_error_ +
                                                               "); destroy it and make a new one");
  }
  return *group_;
}

std::shared_ptr<comm::ProcessGroup> comm_communicator::group_if_ready() {
  std::lock_guard lock(mutex_);
  return group_;
}

std::shared_ptr<comm::ProcessGroup> comm_communicator::take_group() {
  std::lock_guard lock(mutex_);
  in_flight_.clear();
  ready_group_.store(nullptr, std::memory_order_release);
  return std::move(group_);
}

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

void comm_communicator::keep_in_flight(std::shared_ptr<comm::Work> work) {
  std::lock_guard lock(mutex_);
  std::erase_if(in_flight_, [](const auto& pending) { return pending->is_completed(); });
  in_flight_.push_back(std::move(work));
}
