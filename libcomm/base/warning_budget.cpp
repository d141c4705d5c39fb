#include "libcomm/base/warning_budget.hpp"

namespace comm {

WarningBudget::Verdict WarningBudget::take(Clock::time_point now) {
  Verdict verdict;
  if (now - window_start_ >= window_) {
    verdict.unsaid = unsaid();
    window_start_ = now;
    spent_ = 0;
  }
  verdict.write = ++spent_ <= per_window_;
  return verdict;
}

}  // namespace comm
