#include "transport/message/channel.hpp"

#include <utility>

#include "comm/error.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"

namespace comm::transport {

Channel::Sent Channel::send(const FrameHeader& header, const void* payload,
                            std::shared_ptr<detail::Completion> on_written, bool connect_later) {
  if (!connection_) {
    if (!error_ && connect_later) {
      waiting_.push_back({header, payload, std::move(on_written)});
      return Sent::Waiting;
    }
    if (on_written) on_written->fail(error_);
    return Sent::Failed;
  }
  connection_->queue(header, payload, std::move(on_written));
  return connection_->flush() ? Sent::Written : Sent::Queued;
}

void Channel::attach(std::unique_ptr<StreamConnection> connection) {
  connection_ = std::move(connection);
  for (auto& frame : std::exchange(waiting_, {})) {
    connection_->queue(frame.header, frame.payload, std::move(frame.on_written));
  }
}

Channel::Clearance Channel::cleared_to_send(std::uint64_t id) {
  auto found = awaiting_clearance_.find(id);
  if (found == awaiting_clearance_.end()) return withdrawn_.erase(id) != 0 ? Clearance::Withdrawn : Clearance::Unknown;
  PendingSend send = std::move(found->second);
  awaiting_clearance_.erase(found);
  send.lease.settle();  // the peer could not read it: two copies, through the stream
  connection_->queue(make_frame(FrameKind::Data, send.tag, send.bytes, id), send.data, std::move(send.completion));
  return Clearance::Queued;
}

Channel::Clearance Channel::fetched(std::uint64_t id, int peer) {
  auto found = awaiting_clearance_.find(id);
  if (found == awaiting_clearance_.end()) return withdrawn_.erase(id) != 0 ? Clearance::Withdrawn : Clearance::Unknown;
  PendingSend send = std::move(found->second);
  awaiting_clearance_.erase(found);
  if (!send.lease.settle()) return Clearance::Unknown;  // nothing was lent, or not read: a protocol error
  send.completion->complete(send.bytes, peer);
  return Clearance::Queued;
}

bool Channel::fail_send(std::uint64_t id, const std::exception_ptr& error) {
  withdrawn_.erase(id);
  auto found = awaiting_clearance_.find(id);
  if (found == awaiting_clearance_.end()) return false;
  found->second.lease.settle();
  found->second.completion->fail(error);
  awaiting_clearance_.erase(found);
  return true;
}

std::optional<PostedReceive> Channel::take_expected(std::uint64_t id) {
  auto found = cleared_.find(id);
  if (found == cleared_.end()) return std::nullopt;
  std::optional<PostedReceive> receive = std::move(found->second);
  cleared_.erase(found);
  return receive;
}

std::uint8_t* Channel::hear_goodbye(std::uint64_t code, std::uint64_t about, std::size_t bytes) {
  departing_ = true;
  goodbye_code_ = code;
  goodbye_peer_ = about;
  goodbye_reason_.assign(bytes, '\0');
  return reinterpret_cast<std::uint8_t*>(goodbye_reason_.data());
}

std::exception_ptr Channel::loss_error(std::exception_ptr error, int rank, int peer, const std::string& peer_name,
                                       bool quietly) const {
  if (departing_ && goodbye_code_ != 0) {
    // The peer stopped over an error: the same error here, of its type, with its message and the
    // rank it named (a dead rank, both sides of a mismatch), not a wrapper about the rank that
    // passed it on, which would be a healthy one.
    int about = goodbye_peer_ > 0 ? static_cast<int>(goodbye_peer_ - 1) : -1;
    auto code = static_cast<ErrorCode>(goodbye_code_ - 1);
    return detail::error_of_code(code, goodbye_reason_, ErrorContext{.rank = rank, .peer = about});
  }
  if (departing_) {
    std::string why = goodbye_reason_.empty() ? "it finished, aborted, or destroyed the group" : goodbye_reason_;
    return std::make_exception_ptr(PeerClosedError(
        peer_name + " has shut down its process group (" + why + ") while this operation still needed it",
        ErrorContext{.rank = rank, .peer = peer, .op = "transport"}));
  }
  try {
    std::rethrow_exception(error);
  } catch (Error& cause) {
    cause.add_context(ErrorContext{.rank = rank, .peer = peer});
    if (!quietly) log::get(log::Subsystem::Transport).warn("{}", cause.what());
    return std::make_exception_ptr(cause);
  } catch (...) {
  }
  return error;
}

int Channel::fail_all(const std::exception_ptr& error) {
  set_error(error);
  for (auto& [id, send] : awaiting_clearance_) send.lease.settle();  // while the stream is there
  int fd = -1;
  if (connection_) {
    fd = connection_->fd();
    for (auto& completion : connection_->take_queued()) completion->fail(error);
    connection_.reset();
  }
  for (auto& frame : std::exchange(waiting_, {})) {
    if (frame.on_written) frame.on_written->fail(error);
  }
  for (auto& [id, send] : awaiting_clearance_) send.completion->fail(error);
  awaiting_clearance_.clear();  // settled above
  for (auto& [id, receive] : cleared_) receive.completion->fail(error);
  cleared_.clear();
  if (arrival_.receive) arrival_.receive->completion->fail(error);
  arrival_ = {};
  return fd;
}

// Nothing of the group's may touch a caller's buffer once its call has failed (the caller may
// free it): payloads being read are thrown away, queued ones dropped (or copied, when begun),
// large sends withdrawn, cleared receives failed (their data is thrown away when it comes).
void Channel::release(const std::function<bool(std::uint64_t tag)>& of_group, const std::exception_ptr& error) {
  if (connection_) {
    for (auto& completion : connection_->release([&](const FrameHeader& header) { return of_group(header.tag); })) {
      completion->fail(error);
    }
  }
  if (arrival_.receive && of_group(arrival_.receive->tag)) {
    arrival_.receive->completion->fail(error);
    arrival_.receive.reset();
  }
  std::erase_if(waiting_, [&](WaitingFrame& frame) {
    bool callers = carries_callers_bytes(frame.header.kind) && of_group(frame.header.tag);
    if (callers && frame.on_written) frame.on_written->fail(error);
    return callers;
  });
  std::erase_if(cleared_, [&](auto& entry) {
    if (!of_group(entry.second.tag)) return false;
    entry.second.completion->fail(error);
    return true;
  });
  for (auto it = awaiting_clearance_.begin(); it != awaiting_clearance_.end();) {
    if (!of_group(it->second.tag)) {
      ++it;
      continue;
    }
    it->second.lease.settle();  // a peer reading it now throws what it read away
    it->second.completion->fail(error);
    withdrawn_.insert(it->first);  // a ClearToSend still on its way is ignored
    it = awaiting_clearance_.erase(it);
  }
}

}  // namespace comm::transport
