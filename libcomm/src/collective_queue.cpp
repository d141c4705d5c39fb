#include "collective_queue.hpp"

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
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(task), completion, bytes});
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  }
  changed_.notify_all();
  return completion;
}

void CollectiveQueue::run(const std::function<void()>& task) {
  std::unique_lock lock(mutex_);
  if (!running_ && queue_.empty()) {
    running_ = true;
    lock.unlock();
    struct Release {
      CollectiveQueue& queue;
      ~Release() {
        {
          std::lock_guard lock(queue.mutex_);
          queue.running_ = false;
        }
        queue.changed_.notify_all();
      }
    } release{*this};
    task();
    return;
  }
  lock.unlock();
  // Behind earlier asynchronous calls: queue it and wait like any Work would.
  submit([&task] { task(); }, 0)->wait();
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
      entry.task();
      entry.completion->complete(entry.bytes, -1);
    } catch (...) {
      entry.completion->fail(std::current_exception());
    }
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace comm::detail
