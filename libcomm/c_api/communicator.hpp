// What a comm_t points to: a libcomm ProcessGroup (once its init has finished), the rank, size
// and device the C API reports, the communicator's own last error and asynchronous error, and
// the device operations still in flight on it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <optional>
#include "comm/comm.h"

#include "comm/comm.hpp"
#include "libcomm/c_api/unique_id.hpp"

struct comm_communicator {
  comm_communicator(int rank, int size, int device, std::chrono::milliseconds timeout)
      : rank(rank), size(size), device(device), timeout(timeout) {}

  const int rank;
  const int size;
  const int device;  // the CUDA device current at init; -1: none
  const std::chrono::milliseconds timeout;
  // What keeps the store of the communicator's id alive where this process hosts it (dropped
  // when the communicator ends).
  std::shared_ptr<void> hosted_store;
  // The id it was made from (inherited by its splits, shrinks and growths): newcomers growing it
  // meet at that store. Unset for a communicator made from the environment.
  std::optional<comm::c_api::IdContents> id;
  int splits_made = 0;  // comm_split calls so far: names the next split's groups alike everywhere

  // Init finished: the group, or the failure (with its message kept as the last error).
  void ready(std::shared_ptr<comm::ProcessGroup> group);
  void failed(comm_result_t code);
  // The group, once init has finished (waiting for a non-blocking or grouped one); throws an
  // InvalidArgumentError-family error when the init failed or the communicator was aborted.
  comm::ProcessGroup& group() {
    if (auto* ready = ready_group_.load(std::memory_order_acquire)) [[likely]]
      return *ready;
    return wait_for_group();
  }
  // comm_destroy or comm_abort: the group ends (aborted for kAborted), what the communicator
  // held goes, and the object stays as a tombstone: every later call on the handle is refused
  // at once with what happened (the handle never points at freed memory). Returns the group
  // for the caller to end outside the lock, or null.
  enum class End { kLive, kDestroyed, kAborted };
  std::shared_ptr<comm::ProcessGroup> end(End how);
  End ended() const { return ended_.load(std::memory_order_acquire); }

  comm_result_t async_error() const { return async_error_.load(); }
  // A failure that ends the communicator (a dead peer, a mismatch): later calls see it.
  void set_async_error(comm_result_t code);

  void set_last_error(std::string message);
  const char* last_error();

 private:
  comm::ProcessGroup& wait_for_group();

  std::atomic<comm::ProcessGroup*> ready_group_{nullptr};  // the operations' path: no lock
  std::atomic<End> ended_{End::kLive};
  std::mutex mutex_;
  std::condition_variable initialized_;
  bool init_finished_ = false;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::atomic<comm_result_t> async_error_{COMM_IN_PROGRESS};
  std::string last_error_;
};
