#include "libcomm/src/collective_queue.hpp"

namespace comm::detail {

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<Completion> CollectiveQueue::submit(std::function<void()> task, std::size_t bytes) {
  return submit_transfer([task = std::move(task), bytes] {
    task();
    return Moved{bytes, -1};
  });
}

std::shared_ptr<Completion> CollectiveQueue::submit_transfer(std::function<Moved()> task) {
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(task), completion});
    ++queued_;
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  }
  changed_.notify_all();
  return completion;
}

// Sequentially consistent throughout: leave's store to running_ and its load of queued_ pair
// with submit's increment and the worker's load of running_ (under the mutex), so a task queued
// while an inline one ran is never left waiting for a wake-up that nobody sends.
bool CollectiveQueue::try_enter() {
  if (queued_.load() != 0) return false;
  bool idle = false;
  return running_.compare_exchange_strong(idle, true);
}

void CollectiveQueue::leave() {
  running_.store(false);
  if (queued_.load() == 0) return;
  // The worker waits for running_ under the mutex: take it, so it either saw the store or is
  // asleep and gets the notification.
  { std::lock_guard lock(mutex_); }
  changed_.notify_all();  // only the worker waits on the queue
}

void CollectiveQueue::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return (!running_ && !queue_.empty()) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    bool idle = false;
    if (!running_.compare_exchange_strong(idle, true)) continue;  // an inline task got in first
    Entry entry = std::move(queue_.front());
    queue_.pop_front();
    --queued_;
    lock.unlock();
    try {
      Moved moved = entry.task();
      entry.completion->complete(moved.bytes, moved.source);
    } catch (...) {
      entry.completion->fail(std::current_exception());
    }
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace comm::detail
