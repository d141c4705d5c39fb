// Going on without a dead rank: revoking a group (every member's calls on it fail, the job's
// other groups carry on) and shrinking it (the survivors agree on who is out, over the
// connections they have, and make a group of the rest). docs/recovery.md has the semantics.
#include <algorithm>
#include <string>

#include "algorithms/agreement.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/group.hpp"

namespace comm {

void ProcessGroup::Impl::revoke(const std::string& reason) {
  const char* op = "revoke";
  checks_.check_member(op);
  int self = layout_.transport_rank(rank());
  RevokedError cause("rank " + std::to_string(self) + " revoked group " + (name().empty() ? "world" : name()) +
                         (reason.empty() ? std::string() : " (" + reason + ")") +
                         "; its calls fail on every member: the survivors go on in a group made with shrink()",
                     ErrorContext{.rank = rank(), .peer = self, .op = op});
  transport_->groups().revoke(layout_.id, cause);
}

void ProcessGroup::Impl::throw_if_revoked(const char* op, std::int64_t sequence) const {
  std::exception_ptr revoked = transport_->groups().revocation(layout_.id);
  if (!revoked) return;
  try {
    std::rethrow_exception(revoked);
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = rank(), .op = op, .sequence = sequence});
    throw;
  }
}

void ProcessGroup::Impl::throw_if_stopped(const char* op) const {
  std::exception_ptr stopped = transport_->poll();
  if (!stopped) return;
  try {
    std::rethrow_exception(stopped);
  } catch (Error& error) {  // what every other call after the stop fails with
    error.add_context(ErrorContext{.rank = rank(), .op = op});
    throw;
  }
}

std::unique_ptr<ProcessGroup::Impl> ProcessGroup::Impl::shrink(const std::vector<int>& exclude) {
  const char* op = "shrink";
  checks_.check_member(op);
  throw_if_stopped(op);
  ErrorContext context{.rank = rank(), .op = op};
  for (std::size_t i = 0; i < exclude.size(); ++i) {
    COMM_CHECK(exclude[i] >= 0 && exclude[i] < size(), InvalidArgumentError, context,
               "rank " + std::to_string(exclude[i]) + " is not in this group of " + std::to_string(size()) + " ranks");
    COMM_CHECK(std::count(exclude.begin(), exclude.end(), exclude[i]) == 1, InvalidArgumentError, context,
               "rank " + std::to_string(exclude[i]) + " is listed twice");
    COMM_CHECK(exclude[i] != rank(), InvalidArgumentError, context,
               "this rank is in its own list to exclude; a rank leaving the group does not call shrink");
  }
  // The old group stops first, everywhere: a survivor still in a call on it (waiting for a rank
  // that will not come) gets out, and can shrink too.
  if (!transport_->groups().revocation(layout_.id)) revoke("shrinking");
  // The same id on every survivor: the n-th shrink of this group. Mixing in a constant keeps it
  // apart from new_group's children.
  std::uint64_t mix = (std::uint64_t{layout_.id} << 32 ^ (0x5348'0000ull + ++shrinks_)) * 0x9E3779B97F4A7C15ull;
  auto id = static_cast<std::uint32_t>((mix >> 40) % 0x7FFF) + 1;
  COMM_CHECK(id != layout_.id && child_ids_.insert(id).second, InvalidArgumentError, context,
             "the group this shrink would make lands on the internal id (" + std::to_string(id) +
                 ") of a group made from this one; shrink again");
  std::vector<int> members(static_cast<std::size_t>(size()));
  for (int member = 0; member < size(); ++member)
    members[static_cast<std::size_t>(member)] = layout_.transport_rank(member);
  std::vector<int> out = algorithms::agree_on_excluded({*transport_, rank(), size(), members, id, timeout_}, exclude);

  GroupLayout layout{id, {}, /*shared_segment=*/false};
  int position = -1;
  for (int member = 0; member < size(); ++member) {
    if (std::binary_search(out.begin(), out.end(), member)) continue;
    if (member == rank()) position = static_cast<int>(layout.members.size());
    layout.members.push_back(members[static_cast<std::size_t>(member)]);
  }
  std::string left;
  for (int rank : out) left += (left.empty() ? "" : ", ") + std::to_string(rank);
  log::get(log::Subsystem::Group)
      .info("shrink: group {} goes on with {} of its {} ranks (out: {}); this rank is {} now", name(),
            layout.members.size(), size(), left.empty() ? "none" : left, position);
  Identity identity{position,
                    static_cast<int>(layout.members.size()),
                    identity_.local_rank,
                    identity_.local_size,
                    name() + "/shrink" + std::to_string(shrinks_),
                    job_name()};
  auto child = std::make_unique<Impl>(std::move(identity), store_, transport_, timeout_, std::move(layout));
  child->link_ = link_;
  child->medium_choice_ = medium_choice_;
  child->job_secret_ = job_secret_;
  child->job_store_ = job_store_;
  return child;
}

}  // namespace comm
