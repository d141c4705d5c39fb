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
      revoke_groups_of(member, channel.error());
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
  revoke_group(group, cause.code(), cause.message(), cause.peer(), -1);
}

std::exception_ptr MeshTransport::revocation(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  const std::exception_ptr* revoked = revocations_.any() ? revocations_.of_group(group) : nullptr;
  return revoked != nullptr ? *revoked : nullptr;
}

void MeshTransport::ask_to_exclude(int peer, std::uint32_t agreement, std::uint64_t answer_tag) {
  std::lock_guard lock(mutex_);
  if (failures_.stopped() || lost(peer)) return;  // the answer's receive fails with the reason
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

// Carries out a revocation (revocations.hpp decides it): the members are told first (a large
// message refused below reaches its sender after the Revoke, which has failed the sender's other
// transfers of the group already), then the group's receives fail, every channel lets go of the
// callers' memory it holds of the group (the caller may free it once its call failed), and the
// senders of announced large messages are told they will never be cleared.
void MeshTransport::revoke_group(std::uint32_t group, ErrorCode code, const std::string& message, int about,
                                 int told_by) {
  if (failures_.stopped()) return;  // a stopped transport has failed everything already
  auto revocation = revocations_.revoke(group, code, message, about, rank_);
  if (!revocation) return;
  revoked_any_.store(true, std::memory_order_relaxed);
  log::get(log::Subsystem::Transport).debug("group {} revoked: {}", group, message);
  for (int member : revocation->members) {
    if (member == rank_ || member == told_by || lost(member)) continue;
    log::get(log::Subsystem::Transport).debug("group {} revoked: telling {}", group, peer_name(member));
    send_frame(member, revocation->frame, revocation->reason->data(), nullptr);
  }
  auto taken = matcher_.take_group(group);
  for (auto& receive : taken.receives) receive.completion->fail(revocation->error);
  for (Channel& channel : channels_) {
    channel.release([group](std::uint64_t tag) { return group_of(tag) == group; }, revocation->error);
  }
  for (auto& announced : taken.announced) {
    if (lost(announced.source)) continue;
    send_frame(announced.source,
               make_frame(FrameKind::Refused, announced.tag, announced.bytes, announced.id, kRevokedCapacity), nullptr,
               nullptr);
  }
}

// A peer lost, not after an orderly Goodbye: the groups it belongs to are revoked, over its cause.
void MeshTransport::revoke_groups_of(int peer, const std::exception_ptr& error) {
  if (failures_.stopped() || !revocations_.has_groups()) return;
  auto cause = revocations_.cause_of_loss(peer, peer_name(peer), error);
  if (!cause) return;
  for (std::uint32_t group : revocations_.groups_of(peer))
    revoke_group(group, cause->code, cause->message, cause->about, peer);
}

}  // namespace comm::transport
