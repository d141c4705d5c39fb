// What a transport does for the groups that share it, beside moving their messages: it knows
// their members, revokes one group's traffic while the others carry on, and answers for this rank
// in shrink's agreement. Reached through Transport::groups(); a transport without groups (the
// loopback tests') offers the defaults below.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include "comm/error.hpp"

namespace comm::transport {

class GroupControl {
 public:
  virtual ~GroupControl() = default;

  // The groups using this transport (the id in their tags, group_of) and their members as
  // transport ranks: a peer lost abnormally (not a Goodbye after its work was done) revokes
  // every group it belongs to.
  virtual void add_group(std::uint32_t /*group*/, std::vector<int> /*members*/) {}
  virtual void remove_group(std::uint32_t /*group*/) {}
  // Revokes `group` here and on its members (not collective: they are told). Its receives
  // that no message is landing in, and its large sends not yet cleared, fail with an error of
  // `cause`'s kind and message; a transfer already moving bytes into or out of a caller's
  // buffer finishes moving them, then completes or fails; every later transfer of the group
  // fails at once. The other groups carry on: a group's revocation never stops the transport.
  virtual void revoke(std::uint32_t /*group*/, const Error& /*cause*/) {}
  // Why `group` was revoked, or null. Cheap to skip: Transport::revoked_any() is one load.
  virtual std::exception_ptr revocation(std::uint32_t /*group*/) { return nullptr; }

  // Shrink's agreement on the group with id `agreement` (algorithms/agreement.cpp; the rules are
  // transport/message/exclusions.hpp's). ask_to_exclude: asks `peer`'s transport to accept being left
  // out; it answers on its own with a message of `answer_tag` holding one std::int32_t, 1 when
  // it accepted and 0 when that rank is bound to a decision that keeps it in (a lost peer never
  // answers: the receive fails). bind_agreement: this rank takes a decision that keeps it in;
  // -1 when bound, else the transport rank whose request to exclude it was accepted before.
  // excluded_from: that rank, or -1. A transport without them cannot run shrink.
  virtual void ask_to_exclude(int /*peer*/, std::uint32_t /*agreement*/, std::uint64_t /*answer_tag*/) {
    throw InternalError("this transport cannot run shrink's agreement");
  }
  virtual int bind_agreement(std::uint32_t /*agreement*/) {
    throw InternalError("this transport cannot run shrink's agreement");
  }
  virtual int excluded_from(std::uint32_t /*agreement*/) { return -1; }
};

}  // namespace comm::transport
