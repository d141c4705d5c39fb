// Test support: a group of ranks as threads of this process, joined through one HashStore.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace comm::testing {

// Runs body(group) on `ranks` threads; rethrows the first exception any rank threw (after all
// have finished, so no thread outlives the call).
inline void run_ranks(int ranks, const std::function<void(ProcessGroup&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60),
                      const std::string& transport = "auto") {
  auto store = std::make_shared<HashStore>();
  std::vector<std::future<void>> futures;
  for (int rank = 0; rank < ranks; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      auto group = init_process_group(
          {.rank = rank, .world_size = ranks, .timeout = timeout, .store = store, .transport = transport});
      body(*group);
    }));
  }
  std::exception_ptr first;
  for (auto& future : futures) {
    try {
      future.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// A byte every (rank, message, index) gets, so any misplaced byte shows.
inline std::uint8_t pattern(int rank, int message, std::size_t index) {
  return static_cast<std::uint8_t>(
      (index * 131 + static_cast<std::size_t>(rank) * 31 + static_cast<std::size_t>(message) * 7 + (index >> 12)) &
      0xFF);
}

}  // namespace comm::testing

#include <mutex>
#include <string>

namespace comm::testing {

// Catch2 3.7's assertions are not thread-safe: rank threads record what they check here, and
// the test thread asserts on the record afterwards (REQUIRE_RANK_CHECKS).
class RankChecks {
 public:
  void check(bool ok, const char* what, int line, const std::string& detail = "") {
    if (ok) return;
    std::lock_guard lock(mutex_);
    failures_.push_back("line " + std::to_string(line) + ": " + what + (detail.empty() ? "" : " (" + detail + ")"));
  }
  // Runs `call`, which must throw comm::Error whose text contains every fragment.
  template <class Call>
  void check_throws(Call&& call, std::initializer_list<const char*> fragments, int line) {
    try {
      call();
      check(false, "expected a comm::Error", line);
    } catch (const Error& error) {
      std::string text = error.what();
      for (const char* fragment : fragments) {
        check(text.find(fragment) != std::string::npos, fragment, line, "in: " + text);
      }
    }
  }
  std::string report() const {
    std::string text;
    for (const auto& failure : failures_) text += failure + "\n";
    return text;
  }
  bool ok() const { return failures_.empty(); }

 private:
  std::mutex mutex_;
  std::vector<std::string> failures_;
};

}  // namespace comm::testing

#define RANK_CHECK(checks, condition) (checks).check(static_cast<bool>(condition), #condition, __LINE__)
#define RANK_CHECK_THROWS(checks, call, ...) (checks).check_throws([&] { call; }, {__VA_ARGS__}, __LINE__)
#define REQUIRE_RANK_CHECKS(checks) \
  do {                              \
    INFO((checks).report());        \
    CHECK((checks).ok());           \
  } while (false)
