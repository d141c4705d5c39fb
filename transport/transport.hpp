// The interface algorithms and the point-to-point API use to move bytes between ranks,
// whatever the medium (TCP, shared memory, CUDA IPC).
//
// Every transfer is tagged; messages between one pair of ranks with one tag are delivered in
// the order they were sent, and receives match them in the order they were posted. A receive
// from kAnySource matches the first message with its tag from any peer. Completions are
// reported through detail::Completion (behind comm::Work); a transport drives its transfers
// from its own progress thread and from threads waiting on them, never from a thread per
// transfer. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "completion.hpp"

namespace comm::transport {

constexpr int kAnySource = -1;

class Transport : public detail::Progressor {
 public:
  ~Transport() override = default;

  virtual std::shared_ptr<detail::Completion> isend(int peer, const void* data, std::size_t bytes,
                                                    std::uint64_t tag) = 0;
  // peer may be kAnySource; the completion's source() says who sent the message.
  virtual std::shared_ptr<detail::Completion> irecv(int peer, void* data, std::size_t capacity,
                                                    std::uint64_t tag) = 0;
  // "rank 3 (host:pid)", for messages.
  virtual std::string peer_name(int peer) const = 0;
  virtual const char* medium() const = 0;
  // Fails every pending transfer with the reason; later calls fail at once.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace comm::transport
