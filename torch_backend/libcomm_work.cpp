#include "libcomm_work.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>

#include "comm/error.hpp"

namespace torch_libcomm {
namespace {

// Marks Futures completed for every group of the process, in the order their operations
// completed: the libcomm callback only queues the Work (it may run under libcomm's locks, and
// torch's Future runs user callbacks).
class CompletionThread {
 public:
  static CompletionThread& instance() {
    static CompletionThread thread;
    return thread;
  }

  void post(c10::intrusive_ptr<LibcommWork> work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
    }
    changed_.notify_one();
  }

  ~CompletionThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  CompletionThread() : thread_([this] { run(); }) {}

  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      work->complete_future();
      work.reset();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<LibcommWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

LibcommWork::LibcommWork(int rank, c10d::OpType type, std::vector<std::shared_ptr<comm::Work>> works,
                         std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                         std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      works_(std::move(works)),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      timeout_(timeout) {}

bool LibcommWork::isCompleted() { return all_completed(); }

bool LibcommWork::all_completed() const {
  return std::all_of(works_.begin(), works_.end(), [](const auto& work) { return work->is_completed(); });
}

std::exception_ptr LibcommWork::outcome() const {
  for (const auto& work : works_) {
    try {
      work->wait();  // done already: returns or rethrows at once
    } catch (...) {
      return std::current_exception();
    }
  }
  return nullptr;
}

bool LibcommWork::isSuccess() const { return all_completed() && outcome() == nullptr; }

std::exception_ptr LibcommWork::exception() const { return all_completed() ? outcome() : nullptr; }

int LibcommWork::sourceRank() const {
  TORCH_CHECK(works_.size() == 1, "ProcessGroup libcomm: sourceRank() is for a single receive");
  return works_.front()->source_rank();
}

bool LibcommWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == ::kNoTimeout) timeout = timeout_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& work : works_) {
    if (timeout <= std::chrono::milliseconds(0)) {
      work->wait();  // libcomm's own timeout (the group's) applies
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!work->wait_for(std::max(left, std::chrono::milliseconds(0)))) {
      TORCH_CHECK(false, "ProcessGroup libcomm: ", c10d::opTypeToString(opType_), " on rank ", rank_,
                  " timed out after ", timeout.count(), " ms; a peer may be stuck, or not calling it");
    }
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> LibcommWork::getFuture() {
  std::call_once(future_requested_, [this] {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    pending_.store(works_.size());
    if (works_.empty()) return complete_future();
    auto self = c10::intrusive_ptr<LibcommWork>::reclaim_copy(this);
    for (auto& work : works_) {
      work->on_completion([self] {
        if (self->pending_.fetch_sub(1) == 1) CompletionThread::instance().post(self);
      });
    }
  });
  return future_;
}

void LibcommWork::complete_future() {
  if (auto failure = outcome()) {
    future_->setError(failure);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace torch_libcomm
