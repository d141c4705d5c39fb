// Which groups of a transport are revoked and why: a service of the message layer with its own
// state and no reach into the layer's. It decides (a group is revoked once; what its transfers
// fail with; which members to tell; which groups a lost peer takes down) and returns the
// decision; the layer carries it out on its channels and its matcher (MeshGroups, mesh_groups.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/completion.hpp"
#include "transport/message/stream_connection.hpp"
#include "transport/transport.hpp"

namespace comm::transport {

class Revocations {
 public:
  void add_group(std::uint32_t group, std::vector<int> members);
  void remove_group(std::uint32_t group) { groups_.erase(group); }
  bool has_groups() const { return !groups_.empty(); }

  // A group revoked now: what its transfers fail with, the Revoke frame (its payload: `reason`,
  // which lives as long as this service) and the members to send it to.
  struct Revocation {
    std::exception_ptr error;
    FrameHeader frame;
    const std::string* reason;
    std::vector<int> members;
  };
  // Revokes `group` over a cause (its kind, message and the rank it names), as seen by `rank`;
  // nothing when it was revoked before.
  std::optional<Revocation> revoke(std::uint32_t group, ErrorCode code, const std::string& message, int about,
                                   int rank);

  // What a peer lost (not after an orderly Goodbye) revokes: the groups it belongs to, and the
  // cause they are revoked over (the error's kind, message and the rank it names; a peer whose
  // error is a mismatch revokes nothing: the mismatch stops every rank's whole transport).
  struct Cause {
    ErrorCode code;
    std::string message;
    int about;
  };
  std::optional<Cause> cause_of_loss(int peer, const std::string& peer_name, const std::exception_ptr& error) const;
  std::vector<std::uint32_t> groups_of(int peer) const;

  // Whether any group was revoked: the one test the hot path pays (the rest is out of line).
  bool any() const { return !revoked_.empty(); }
  // What a transfer of `group` (or of `tag`'s group) fails with, or null.
  [[gnu::noinline]] const std::exception_ptr* of_group(std::uint32_t group) const;
  const std::exception_ptr* of_tag(std::uint64_t tag) const { return any() ? of_group(group_of(tag)) : nullptr; }
  // Fails `completion` when `tag`'s group is revoked; true if it did.
  [[gnu::cold, gnu::noinline]] bool fail_if_revoked(std::uint64_t tag, detail::Completion& completion) const;
  // The cause of the first revocation since a group was last made (none once the survivors
  // made their new group): a rank that stops now says it in its Goodbye, so that peers it
  // leaves waiting in other groups learn why (the dead rank), not only that it left.
  const std::optional<Error>& unrecovered() const { return unrecovered_; }

 private:
  struct Revoked {
    std::exception_ptr error;
    std::string reason;  // what the Revoke frames carry (they point into it until written)
  };
  std::unordered_map<std::uint32_t, std::vector<int>> groups_;  // group id -> members (transport ranks)
  std::unordered_map<std::uint32_t, Revoked> revoked_;          // never forgotten: ids are not reused
  std::optional<Error> unrecovered_;
};

}  // namespace comm::transport
