// Revoking one group of the transport: its transfers stop on every member, the transport and
// the other groups carry on (so that the survivors can agree on a smaller group over the same
// connections, ProcessGroup::shrink). A member that learns of a revocation tells the others
// too, so that one rank dying halfway through telling them still reaches them all. And the part
// of shrink's agreement that a rank's transport answers for it (exclusions.hpp).
#include <algorithm>

#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"
#include "transport/message/mesh_transport.hpp"

namespace comm::transport {

void MeshTransport::add_group(std::uint32_t group, std::vector<int> members) {
  std::lock_guard lock(mutex_);
  revocations_.add_group(group, members);
  // A member lost already (a shrink's decision can name one that died as it was sent): the
  // group is born revoked, as it would have been had it existed then.
  for (int member : members) {
    const Channel& channel = channels_[member];
    if (member != rank_ && channel.lost() && !channel.left_in_order()) {
      revocations_.peer_lost(member, channel.error());
      break;
    }
  }
}

void MeshTransport::remove_group(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  revocations_.remove_group(group);
}

void MeshTransport::revoke(std::uint32_t group, const Error& cause) {
  std::lock_guard lock(mutex_);
  revocations_.revoke(group, cause, -1);
}

std::exception_ptr MeshTransport::revocation(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  const std::exception_ptr* revoked = revocations_.any() ? revocations_.of_group(group) : nullptr;
  return revoked != nullptr ? *revoked : nullptr;
}

void MeshTransport::ask_to_exclude(int peer, std::uint32_t agreement, std::uint64_t answer_tag) {
  std::lock_guard lock(mutex_);
  if (aborted_ || lost(peer)) return;  // the answer's receive fails with the reason
  send_frame(peer, make_frame(FrameKind::Exclude, answer_tag, 0, agreement), nullptr, nullptr);
}

int MeshTransport::bind_agreement(std::uint32_t agreement) {
  std::lock_guard lock(mutex_);
  return exclusions_.bind(agreement);
}

int MeshTransport::excluded_from(std::uint32_t agreement) {
  std::lock_guard lock(mutex_);
  return exclusions_.excluded_by(agreement);
}

void MeshTransport::answer_exclusion(int peer, const FrameHeader& request) {
  static constexpr std::int32_t kAnswers[2] = {0, 1};  // refused, accepted: payloads that live for ever
  bool accepted = exclusions_.exclude(static_cast<std::uint32_t>(request.id), peer);
  log::get(log::Subsystem::Transport)
      .debug("{} asked to leave this rank out of shrink {}: {}", peer_name(peer), request.id,
             accepted ? "accepted" : "refused, bound to a decision already");
  send_frame(peer, make_frame(FrameKind::Eager, request.tag, sizeof(std::int32_t)), &kAnswers[accepted ? 1 : 0],
             nullptr);
}

const std::exception_ptr* MeshTransport::Revocations::of_group(std::uint32_t group) const {
  auto found = revoked_.find(group);
  return found == revoked_.end() ? nullptr : &found->second.error;
}

bool MeshTransport::Revocations::fail_if_revoked(std::uint64_t tag, detail::Completion& completion) const {
  const std::exception_ptr* revoked = of_tag(tag);
  if (revoked == nullptr) return false;
  completion.fail(*revoked);
  return true;
}

void MeshTransport::Revocations::revoke(std::uint32_t group, ErrorCode code, const std::string& message, int about,
                                        int told_by) {
  // A stopped transport has failed everything already; a group is revoked once.
  if (mesh_.aborted_ || revoked_.count(group) != 0) return;
  auto error = detail::error_of_code(code, message, ErrorContext{.rank = mesh_.rank_, .peer = about});
  if (!unrecovered_) unrecovered_.emplace(code, message, ErrorContext{.rank = mesh_.rank_, .peer = about});
  Revoked& revoked = revoked_[group];
  revoked.error = error;
  revoked.reason = message;
  mesh_.revoked_any_.store(true, std::memory_order_relaxed);
  log::get(log::Subsystem::Transport).debug("group {} revoked: {}", group, message);
  // The members first: a large message refused below reaches its sender after the Revoke, which
  // has failed the sender's other transfers of the group already.
  if (auto members = groups_.find(group); members != groups_.end()) {
    FrameHeader frame = make_frame(FrameKind::Revoke, group, revoked.reason.size(), about >= 0 ? 1 + about : 0,
                                   1 + static_cast<std::uint64_t>(code));
    for (int member : std::vector<int>(members->second)) {
      if (member == mesh_.rank_ || member == told_by || mesh_.lost(member)) continue;
      log::get(log::Subsystem::Transport).debug("group {} revoked: telling {}", group, mesh_.peer_name(member));
      mesh_.send_frame(member, frame, revoked.reason.data(), nullptr);
    }
  }
  auto taken = mesh_.matcher_.take_group(group);
  for (auto& receive : taken.receives) receive.completion->fail(error);
  release_callers_memory(group, error);
  // Announced large messages will never be cleared: their senders stop waiting for that.
  for (auto& message : taken.announced) {
    if (mesh_.lost(message.source)) continue;
    mesh_.send_frame(message.source,
                     make_frame(FrameKind::Refused, message.tag, message.bytes, message.id, kRevokedCapacity), nullptr,
                     nullptr);
  }
}

// Nothing of the group's may touch a caller's buffer once its call has failed (the caller may
// free it): each channel lets go of what it holds of the group (Channel::release).
void MeshTransport::Revocations::release_callers_memory(std::uint32_t group, const std::exception_ptr& error) {
  for (Channel& channel : mesh_.channels_) {
    channel.release([group](std::uint64_t tag) { return group_of(tag) == group; }, error);
  }
}

void MeshTransport::Revocations::peer_lost(int peer, std::exception_ptr error) {
  if (mesh_.aborted_ || groups_.empty()) return;
  ErrorCode code = ErrorCode::PeerClosed;
  std::string message = mesh_.peer_name(peer) + " was lost";
  int about = peer;
  try {
    std::rethrow_exception(error);
  } catch (const Error& cause) {
    code = cause.code();
    message = cause.message();
    if (cause.peer() >= 0) about = cause.peer();
  } catch (const std::exception& cause) {
    message = cause.what();
  }
  // A mismatch stops every rank's whole transport (the peer's Goodbye said so, and the call
  // failing here stops this one): a call never pairs with another, in any group.
  if (code == ErrorCode::Mismatch) return;
  std::vector<std::uint32_t> affected;
  for (const auto& [group, members] : groups_) {
    if (std::find(members.begin(), members.end(), peer) != members.end()) affected.push_back(group);
  }
  for (std::uint32_t group : affected) revoke(group, code, message, about, peer);
}

}  // namespace comm::transport
