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
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  }
  changed_.notify_all();
  return completion;
}

bool CollectiveQueue::try_enter() {
  std::lock_guard lock(mutex_);
  if (running_ || !queue_.empty()) return false;
  running_ = true;
  return true;
}

void CollectiveQueue::leave() {
  bool waiting;
  {
    std::lock_guard lock(mutex_);
    running_ = false;
    waiting = !queue_.empty();
  }
  if (waiting) changed_.notify_all();  // only the worker waits on the queue
}

void CollectiveQueue::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return (!running_ && !queue_.empty()) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    Entry entry = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
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
