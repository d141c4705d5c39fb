// The groups sharing one message layer (GroupControl): which are revoked and why (Revocations
// decides), carried out on the channels and the matcher here; and this rank's side of shrink's
// agreement (Exclusions), answered on its own when a peer asks.
//
// The GroupControl calls take the layer's lock; the others run under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "libcomm/base/atomic_mutex.hpp"
#include "transport/group_control.hpp"
#include "transport/message/exclusions.hpp"
#include "transport/message/matcher.hpp"
#include "transport/message/peers.hpp"
#include "transport/message/revocations.hpp"

namespace comm::transport {

class ProgressEngine;
class PeerLoss;

class MeshGroups final : public GroupControl {
 public:
  // `revoked_any`: raised at the first revocation (Transport::revoked_any).
  MeshGroups(detail::AtomicMutex& mutex, Peers& peers, Matcher& matcher, ProgressEngine& engine, PeerLoss& loss,
             std::atomic<bool>& revoked_any)
      : mutex_(mutex), peers_(peers), matcher_(matcher), engine_(engine), loss_(loss), revoked_any_(revoked_any) {}

  void add_group(std::uint32_t group, std::vector<int> members) override;
  void remove_group(std::uint32_t group) override;
  void revoke(std::uint32_t group, const Error& cause) override;
  std::exception_ptr revocation(std::uint32_t group) override;
  void ask_to_exclude(int peer, std::uint32_t agreement, std::uint64_t answer_tag) override;
  int bind_agreement(std::uint32_t agreement) override;
  int excluded_from(std::uint32_t agreement) override;

  // What the hot path asks (any(), of_tag(), fail_if_revoked()).
  const Revocations& revocations() const { return revocations_; }
  // The cause of a revocation no new group followed (Revocations::unrecovered).
  const std::optional<Error>& unrecovered() const { return revocations_.unrecovered(); }
  // Revokes `group` over a cause (its kind, message, the rank it names), told by `told_by` (-1:
  // decided here): its members told, its transfers failed, the callers' memory released.
  void revoke_group(std::uint32_t group, ErrorCode code, const std::string& message, int about, int told_by);
  // A peer lost, not after an orderly Goodbye: the groups it belongs to are revoked.
  void revoke_groups_of(int peer, const std::exception_ptr& error);
  // A peer's Exclude frame: accepted or refused, answered with a message of its tag.
  void answer_exclusion(int peer, const FrameHeader& request);

 private:
  detail::AtomicMutex& mutex_;
  Peers& peers_;
  Matcher& matcher_;
  ProgressEngine& engine_;
  PeerLoss& loss_;
  std::atomic<bool>& revoked_any_;
  Revocations revocations_;
  Exclusions exclusions_;  // shrink agreements this rank accepted to be left out of, or bound to
};

}  // namespace comm::transport
