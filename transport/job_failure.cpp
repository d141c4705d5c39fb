#include "transport/job_failure.hpp"

namespace comm::transport {

void SettledJobFailure::check(const std::function<void()>& look) {
  if (settled_) return;
  try {
    job_failure_.check();
  } catch (const Error&) {
    settled_ = true;
    throw;
  }
  if (!look) return;
  try {
    look();
  } catch (const Error& found) {
    settled_ = true;
    job_failure_.fail(found);
    throw;
  }
}

void SettledJobFailure::fail(const Error& error, const std::function<void()>& look) {
  check(look);
  if (settled_) return;
  settled_ = true;
  job_failure_.fail(error);
}

}  // namespace comm::transport
