// Runs a group's collectives one at a time, in issue order. A blocking call with nothing queued
// runs on the caller's thread (no hand-off on the latency path); otherwise calls go to a worker
// thread the queue starts on first need, and the caller's Work completes when it has run.
// GPU send/recv use one queue per peer and direction the same way (point_to_point.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "libcomm/base/completion.hpp"

namespace comm::detail {

class CollectiveQueue {
 public:
  CollectiveQueue() = default;
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // The task's exception, if any, fails the returned completion.
  std::shared_ptr<Completion> submit(std::function<void()> task, std::size_t bytes);
  // What a transfer task reports to its completion: bytes moved and the source rank.
  struct Moved {
    std::size_t bytes = 0;
    int source = -1;
  };
  std::shared_ptr<Completion> submit_transfer(std::function<Moved()> task);
  // Runs the task before returning, after everything submitted earlier; rethrows its exception.
  // A template, so the common case (nothing queued: run it here) allocates nothing.
  template <class Task>
  void run(Task&& task) {
    if (try_enter()) {
      struct Leave {
        CollectiveQueue& queue;
        ~Leave() { queue.leave(); }
      } leave{*this};
      task();
      return;
    }
    // Behind earlier asynchronous calls: queue it and wait like any Work would.
    submit([&task] { task(); }, 0)->wait();
  }

 private:
  struct Entry {
    std::function<Moved()> task;
    std::shared_ptr<Completion> completion;
  };
  void work();
  bool try_enter();  // claims the queue for an inline task if nothing is queued or running
  void leave();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Entry> queue_;
  // A task is running (on the worker or inline). Atomic, as is the count of queued tasks, so
  // that the inline case (try_enter, leave) takes no lock: on an 8-byte barrier the mutex
  // taken twice was 110 of 732 instructions (docs/design/latency.md).
  std::atomic<bool> running_{false};
  std::atomic<std::size_t> queued_{0};  // queue_.size(), changed under mutex_
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace comm::detail
