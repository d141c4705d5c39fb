// What this rank has said about each shrink agreement (algorithms/agreement.cpp), by the id of
// the group it makes: whether it accepted being left out of it (and at whose request), and
// whether it bound itself to a decision that keeps it in. The two exclude each other, and that
// is what makes shrink an agreement when survivors pass different lists: a coordinator that
// would leave out a live rank must first have that rank's acceptance, which the rank's transport
// gives on its own (the rank may be in no call at all) unless the rank is bound already; a rank
// that accepted can no longer bind, so no two coordinators can both make a group (each would
// have had to exclude the other first). The transport keeps it, under its lock.
#pragma once

#include <cstdint>
#include <unordered_map>

namespace comm::transport {

class Exclusions {
 public:
  // `asker` (a transport rank) would leave this rank out of agreement `id`: true when accepted
  // (from then on bind() refuses), false when this rank is bound to a decision of it already.
  bool exclude(std::uint32_t id, int asker) {
    State& state = states_[id];
    if (state.bound) return false;
    if (state.excluded_by < 0) state.excluded_by = asker;
    return true;
  }
  // This rank takes a decision of agreement `id` that keeps it in: -1 when bound now (or
  // already), else the rank whose exclusion it accepted before.
  int bind(std::uint32_t id) {
    State& state = states_[id];
    if (state.excluded_by < 0) state.bound = true;
    return state.excluded_by;
  }
  // The rank whose exclusion from agreement `id` this rank accepted, or -1.
  int excluded_by(std::uint32_t id) const {
    auto found = states_.find(id);
    return found == states_.end() ? -1 : found->second.excluded_by;
  }

 private:
  struct State {
    bool bound = false;
    int excluded_by = -1;
  };
  std::unordered_map<std::uint32_t, State> states_;  // a few per shrink; ids are not reused
};

}  // namespace comm::transport
