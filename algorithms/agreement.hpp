// Agreement among the survivors of a group on which of its ranks are out (ProcessGroup::shrink),
// over the transport's connections only (the store may have died with its rank), tolerating
// ranks that die while it runs, and survivors whose lists of ranks to exclude differ.
//
// The lowest rank a survivor believes alive and not left out coordinates: every other survivor
// sends it what it knows (the ranks it found dead or was asked to exclude, and any decision it
// was sent); the coordinator decides (every rank some survivor named or found dead is out), asks
// every live rank it leaves out to accept that (the rank's transport answers, whatever the rank is
// doing: transport/message/exclusions.hpp), binds itself, sends the decision, waits for every survivor's
// acknowledgement (each binds itself first), then commits; a survivor returns the decision once
// committed. A rank that accepted to be left out can never bind, so no two coordinators can both
// make a group: each would need the other's acceptance before binding. A survivor that finds
// its coordinator dead turns to the next lowest rank alive, carrying the decision it was sent,
// if any, which the new coordinator then adopts: once any survivor has returned a decision, every
// survivor holds it (the coordinator commits only after every acknowledgement), so no second
// decision can be made. A rank that dies after the decision stays in it (the group made from
// it is revoked once that death is seen, and the survivors shrink again).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/transport.hpp"

namespace comm::algorithms {

struct AgreementPlace {
  transport::Transport& transport;
  int rank;                      // this survivor, in the group
  int size;                      // the group's size
  std::span<const int> members;  // group rank -> transport rank
  std::uint32_t group_id;        // the id of the group being made: its tags carry the agreement
  std::chrono::milliseconds timeout;
};

// The group ranks that are out, sorted: `excluded` (what this caller was asked to exclude),
// every rank found dead before or during the agreement, the same on every survivor that
// returns. Throws PeerClosedError on a rank the others excluded, TimeoutError when a
// coordinator or a survivor stays silent past the timeout (a rank alive but not shrinking),
// MismatchError when the survivors' lists differ so that no decision can hold.
std::vector<int> agree_on_excluded(const AgreementPlace& place, const std::vector<int>& excluded);

}  // namespace comm::algorithms
