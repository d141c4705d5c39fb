// How many warnings of one kind to write: a flood of bad connections (a port scanner, a stranger
// opening thousands of sockets) must not become a flood of log lines. At most `per_window`
// warnings are written in each window; the rest are counted, and the next window's first
// verdict says how many went unsaid. Not thread-safe: one owner (an accept loop, an I/O thread).
#pragma once

#include <chrono>
#include <cstddef>

namespace comm {

class WarningBudget {
 public:
  using Clock = std::chrono::steady_clock;

  WarningBudget(std::size_t per_window, std::chrono::seconds window) : per_window_(per_window), window_(window) {}

  struct Verdict {
    bool write = false;      // write this warning
    std::size_t unsaid = 0;  // warnings suppressed in the window that just closed (say so first)
  };
  Verdict take(Clock::time_point now = Clock::now());

  // Warnings suppressed in the current window so far (for a last line when the owner is done).
  std::size_t unsaid() const { return spent_ > per_window_ ? spent_ - per_window_ : 0; }
  std::chrono::seconds window() const { return window_; }

 private:
  std::size_t per_window_;
  std::chrono::seconds window_;
  Clock::time_point window_start_{};
  std::size_t spent_ = 0;
};

}  // namespace comm
