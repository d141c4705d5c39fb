// Issue 27's findings that a unit can show: the budget that keeps a flood of strangers from
// becoming a flood of log lines.
#include <catch2/catch_test_macros.hpp>

#include "libcomm/base/warning_budget.hpp"

using namespace std::chrono_literals;

TEST_CASE("a flood of refusals writes a few warnings and one line for the rest", "[security]") {
  comm::WarningBudget budget(10, 10s);
  auto start = comm::WarningBudget::Clock::now();
  std::size_t written = 0;
  for (int i = 0; i < 2000; ++i) {
    auto verdict = budget.take(start + std::chrono::milliseconds(i));  // 2,000 within 2 s
    CHECK(verdict.unsaid == 0);
    written += verdict.write ? 1 : 0;
  }
  CHECK(written == 10);
  CHECK(budget.unsaid() == 1990);
  // The next window opens with the count of the last one's unsaid warnings, and writes again.
  auto verdict = budget.take(start + 11s);
  CHECK(verdict.unsaid == 1990);
  CHECK(verdict.write);
  CHECK(budget.unsaid() == 0);
}
