// Work: a handle to an operation in flight (isend, irecv, and the i-forms of collectives).
//
// wait() returns when the operation completed and rethrows its comm::Error if it failed; it
// gives up with a TimeoutError naming the peer and tag after the group's timeout. wait_for()
// returns false at its own timeout without cancelling anything. A Work may be waited on from
// any thread, more than once. Buffers handed to the operation must stay untouched until it
// completes. The library makes Works; programs only hold them.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

namespace comm {

class Work {
 public:
  virtual ~Work() = default;

  virtual bool is_completed() = 0;
  virtual void wait() = 0;
  virtual bool wait_for(std::chrono::milliseconds timeout) = 0;
  // For a receive from kAnySource: the rank the message came from (after completion).
  virtual int source_rank() const = 0;
  // Bytes transferred (after completion).
  virtual std::size_t bytes() const = 0;
  // Calls `callback` once the operation has completed or failed (wait() then returns or
  // throws at once), on whichever thread completes it, or here when it already has; nobody
  // needs to wait or poll for it to run. At most one callback per Work. It must be short, must
  // not throw, and must not call into libcomm (it may run under the library's locks): hand the
  // news to a thread of your own, as torch's Future or an event loop would.
  virtual void on_completion(std::function<void()> callback) = 0;

 protected:
  Work() = default;
  Work(const Work&) = default;
  Work& operator=(const Work&) = default;
};

}  // namespace comm
