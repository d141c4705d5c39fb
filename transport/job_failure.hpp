// How the set-up of a group's transport learns of the job's failure and tells the others of its
// own while it waits on other ranks, and why it settles on one cause.
#pragma once

#include <functional>

#include "comm/error.hpp"

namespace comm::transport {

// `check` throws when the job has failed elsewhere (another rank's published error); `fail`
// publishes this rank's finding (a dead peer), before anything is cleaned up, so that no rank
// tripping over the clean-up is taken for the cause; it throws the job's first failure, or
// returns and leaves its caller to throw the finding. `connected` runs once this rank holds a
// connection to every other: from then on the transport sees a rank die, and the store need not
// (init withdraws its last word there).
struct JobFailure {
  std::function<void()> check = [] {};
  std::function<void(const Error&)> fail = [](const Error&) {};
  std::function<void()> connected = [] {};
};

// The job's failure is settled once: by the first cause this rank learns (`check`) or tells
// (`fail`). A second look after that would find the ranks that have since exited on that cause,
// the store's host among them, and blame one of them (the store gone, its host's connection
// closed) for a death it only reported.
class SettledJobFailure {
 public:
  explicit SettledJobFailure(const JobFailure& job_failure) : job_failure_(job_failure) {}

  // Throws the published failure, if any; then, if `look` throws what it finds (a dead peer),
  // publishes that and rethrows it.
  void check(const std::function<void()>& look = {});
  // Publishes `error` (after `check(look)`, whose cause wins) and throws the job's first failure,
  // or returns for the caller to throw `error`: at once when the failure is settled already, as
  // when `error` is that failure coming back up.
  void fail(const Error& error, const std::function<void()>& look = {});
  void connected() { job_failure_.connected(); }

 private:
  const JobFailure& job_failure_;
  bool settled_ = false;
};

}  // namespace comm::transport
