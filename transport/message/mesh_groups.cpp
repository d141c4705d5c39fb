// Revoking one group of the transport: its transfers stop on every member, the transport and
// the other groups carry on (so that the survivors can agree on a smaller group over the same
// connections, ProcessGroup::shrink). A member that learns of a revocation tells the others
// too, so that one rank dying halfway through telling them still reaches them all. And the part
// of shrink's agreement that a rank's transport answers for it (exclusions.hpp).
#include "transport/message/mesh_groups.hpp"

#include "libcomm/base/log.hpp"
#include "transport/message/peer_loss.hpp"
#include "transport/message/progress_engine.hpp"

namespace comm::transport {

void MeshGroups::add_group(std::uint32_t group, std::vector<int> members) {
  std::lock_guard lock(mutex_);
  revocations_.add_group(group, members);
  // A member lost already (a shrink's decision can name one that died as it was sent): the
  // group is born revoked, as it would have been had it existed then.
  for (int member : members) {
    const Channel& channel = peers_[member];
    if (member != peers_.rank() && channel.lost() && !channel.left_in_order()) {
      revoke_groups_of(member, channel.error());
      break;
    }
  }
}

void MeshGroups::remove_group(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  revocations_.remove_group(group);
}

void MeshGroups::revoke(std::uint32_t group, const Error& cause) {
  std::lock_guard lock(mutex_);
  revoke_group(group, cause.code(), cause.message(), cause.peer(), -1);
}

std::exception_ptr MeshGroups::revocation(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  const std::exception_ptr* revoked = revocations_.any() ? revocations_.of_group(group) : nullptr;
  return revoked != nullptr ? *revoked : nullptr;
}

void MeshGroups::ask_to_exclude(int peer, std::uint32_t agreement, std::uint64_t answer_tag) {
  std::lock_guard lock(mutex_);
  if (loss_.stopped() || peers_.lost(peer)) return;  // the answer's receive fails with the reason
  engine_.send_frame(peer, make_frame(FrameKind::Exclude, answer_tag, 0, agreement), nullptr, nullptr);
}

int MeshGroups::bind_agreement(std::uint32_t agreement) {
  std::lock_guard lock(mutex_);
  return exclusions_.bind(agreement);
}

int MeshGroups::excluded_from(std::uint32_t agreement) {
  std::lock_guard lock(mutex_);
  return exclusions_.excluded_by(agreement);
}

void MeshGroups::answer_exclusion(int peer, const FrameHeader& request) {
  static constexpr std::int32_t kAnswers[2] = {0, 1};  // refused, accepted: payloads that live for ever
  bool accepted = exclusions_.exclude(static_cast<std::uint32_t>(request.id), peer);
  log::get(log::Subsystem::Transport)
      .debug("{} asked to leave this rank out of shrink {}: {}", peers_.name(peer), request.id,
             accepted ? "accepted" : "refused, bound to a decision already");
  engine_.send_frame(peer, make_frame(FrameKind::Eager, request.tag, sizeof(std::int32_t)), &kAnswers[accepted ? 1 : 0],
             nullptr);
}

// Carries out a revocation (revocations.hpp decides it): the members are told first (a large
// message refused below reaches its sender after the Revoke, which has failed the sender's other
// transfers of the group already), then the group's receives fail, every channel lets go of the
// callers' memory it holds of the group (the caller may free it once its call failed), and the
// senders of announced large messages are told they will never be cleared.
void MeshGroups::revoke_group(std::uint32_t group, ErrorCode code, const std::string& message, int about,
                                 int told_by) {
  if (loss_.stopped()) return;  // a stopped transport has failed everything already
  auto revocation = revocations_.revoke(group, code, message, about, peers_.rank());
  if (!revocation) return;
  revoked_any_.store(true, std::memory_order_relaxed);
  log::get(log::Subsystem::Transport).debug("group {} revoked: {}", group, message);
  for (int member : revocation->members) {
    if (member == peers_.rank() || member == told_by || peers_.lost(member)) continue;
    log::get(log::Subsystem::Transport).debug("group {} revoked: telling {}", group, peers_.name(member));
    engine_.send_frame(member, revocation->frame, revocation->reason->data(), nullptr);
  }
  auto taken = matcher_.take_group(group);
  for (auto& receive : taken.receives) receive.completion->fail(revocation->error);
  for (Channel& channel : peers_) {
    channel.release([group](std::uint64_t tag) { return group_of(tag) == group; }, revocation->error);
  }
  for (auto& announced : taken.announced) {
    if (peers_.lost(announced.source)) continue;
    engine_.send_frame(announced.source,
               make_frame(FrameKind::Refused, announced.tag, announced.bytes, announced.id, kRevokedCapacity), nullptr,
               nullptr);
  }
}

// A peer lost, not after an orderly Goodbye: the groups it belongs to are revoked, over its cause.
void MeshGroups::revoke_groups_of(int peer, const std::exception_ptr& error) {
  if (loss_.stopped() || !revocations_.has_groups()) return;
  auto cause = revocations_.cause_of_loss(peer, peers_.name(peer), error);
  if (!cause) return;
  for (std::uint32_t group : revocations_.groups_of(peer))
    revoke_group(group, cause->code, cause->message, cause->about, peer);
}

}  // namespace comm::transport
