#include "transport/message/revocations.hpp"

#include <algorithm>

#include "libcomm/base/check.hpp"

namespace comm::transport {

void Revocations::add_group(std::uint32_t group, std::vector<int> members) {
  groups_[group] = std::move(members);
  unrecovered_.reset();
}

std::optional<Revocations::Revocation> Revocations::revoke(std::uint32_t group, ErrorCode code,
                                                           const std::string& message, int about, int rank) {
  if (revoked_.count(group) != 0) return std::nullopt;  // a group is revoked once
  auto error = detail::error_of_code(code, message, ErrorContext{.rank = rank, .peer = about});
  if (!unrecovered_) unrecovered_.emplace(code, message, ErrorContext{.rank = rank, .peer = about});
  Revoked& revoked = revoked_[group];
  revoked.error = error;
  revoked.reason = message;
  Revocation revocation{error,
                        make_frame(FrameKind::Revoke, group, revoked.reason.size(), about >= 0 ? 1 + about : 0,
                                   1 + static_cast<std::uint64_t>(code)),
                        &revoked.reason,
                        {}};
  if (auto members = groups_.find(group); members != groups_.end()) revocation.members = members->second;
  return revocation;
}

std::optional<Revocations::Cause> Revocations::cause_of_loss(int peer, const std::string& peer_name,
                                                             const std::exception_ptr& error) const {
  Cause cause{ErrorCode::PeerClosed, peer_name + " was lost", peer};
  try {
    std::rethrow_exception(error);
  } catch (const Error& lost) {
    cause.code = lost.code();
    cause.message = lost.message();
    if (lost.peer() >= 0) cause.about = lost.peer();
  } catch (const std::exception& lost) {
    cause.message = lost.what();
  }
  // A mismatch stops every rank's whole transport (the peer's Goodbye said so, and the call
  // failing here stops this one): a call never pairs with another, in any group.
  if (cause.code == ErrorCode::Mismatch) return std::nullopt;
  return cause;
}

std::vector<std::uint32_t> Revocations::groups_of(int peer) const {
  std::vector<std::uint32_t> groups;
  for (const auto& [group, members] : groups_) {
    if (std::find(members.begin(), members.end(), peer) != members.end()) groups.push_back(group);
  }
  return groups;
}

const std::exception_ptr* Revocations::of_group(std::uint32_t group) const {
  auto found = revoked_.find(group);
  return found == revoked_.end() ? nullptr : &found->second.error;
}

bool Revocations::fail_if_revoked(std::uint64_t tag, detail::Completion& completion) const {
  const std::exception_ptr* revoked = of_tag(tag);
  if (revoked == nullptr) return false;
  completion.fail(*revoked);
  return true;
}

}  // namespace comm::transport
