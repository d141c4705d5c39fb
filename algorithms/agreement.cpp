// The survivors' agreement on who is out (agreement.hpp explains the protocol and why it holds).
#include "algorithms/agreement.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "algorithms/collective_context.hpp"
#include "comm/error.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/base/log.hpp"

namespace comm::algorithms {
namespace {

using Clock = std::chrono::steady_clock;
using Words = std::vector<std::int32_t>;

// Exclusion: a live rank's answer to being left out (its transport's, Transport::ask_to_exclude).
enum class Phase : std::uint64_t { Propose = 1, Decide, Acknowledge, Commit, Exclusion };
const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::Propose: return "proposal";
    case Phase::Decide: return "decision";
    case Phase::Acknowledge: return "acknowledgement";
    case Phase::Commit: return "commit";
    case Phase::Exclusion: return "answer to being left out";
  }
  return "?";
}

// What a coordinator that gave up sends in place of a decision or a commit: this marker, the
// rank that made it give up and why, so that the others' errors name that rank, not the
// coordinator.
constexpr std::int32_t kGaveUp = -1;
enum class GaveUp : std::int32_t {
  Silent,               // the rank stayed silent past the timeout
  Bound,                // a live rank the decision leaves out is bound to another decision
  CoordinatorExcluded,  // the rank's list (or its shrink) leaves the coordinator out
  SurvivorExcluded,     // a survivor of the decision had accepted to be left out by the rank
};
// What a survivor sends in place of its acknowledgement when it accepted to be left out by
// another coordinator (its transport did): this marker, then that coordinator.
constexpr std::int32_t kLeftOut = -2;
// How long a coordinator waits for a live rank's transport to answer a request to leave it out:
// a running process answers within milliseconds; one that does not is stopped or dying, and is
// taken for dead (safe: agreement.hpp says why).
constexpr auto kAnswerWait = std::chrono::milliseconds(1000);

// A decision some coordinator sent: the ranks out.
struct Decision {
  int coordinator = -1;
  std::vector<int> out;
};

class Agreement {
 public:
  Agreement(const AgreementPlace& place, const std::vector<int>& excluded)
      : place_(place), out_(static_cast<std::size_t>(place.size), false), deadline_(Clock::now() + place.timeout) {
    for (int rank : excluded) out_[static_cast<std::size_t>(rank)] = true;
    for (int peer = 0; peer < place_.size; ++peer) {
      if (peer != place_.rank && place_.transport.failure(member(peer))) out_[static_cast<std::size_t>(peer)] = true;
    }
  }

  std::vector<int> run() {
    try {
      throw_if_left_out();  // accepted before this rank called shrink: it says so at once
      return agree();
    } catch (const LeftOut& left_out) {
      throw_left_out(left_out.by);
    }
  }

 private:
  std::vector<int> agree() {
    while (true) {
      // Left out meanwhile (a coordinator that then finished, and left, looks dead from here).
      throw_if_left_out();
      int coordinator = 0;
      while (coordinator < place_.size && out_[static_cast<std::size_t>(coordinator)]) ++coordinator;
      if (coordinator == place_.size || coordinator > place_.rank) {
        // Only possible when this rank was excluded itself (by its own list).
        throw_excluded(place_.rank);
      }
      if (coordinator == place_.rank) return coordinate();
      if (auto decided = follow(coordinator)) return *decided;
      out_[static_cast<std::size_t>(coordinator)] = true;  // it died: the next one
      log::get(log::Subsystem::Algorithms).debug("shrink: coordinator {} lost, turning to the next", coordinator);
    }
  }

  struct Receive {
    std::shared_ptr<Words> words;
    std::shared_ptr<detail::Completion> completion;
  };

  int member(int rank) const { return place_.members[static_cast<std::size_t>(rank)]; }
  std::uint64_t tag(int coordinator, Phase phase) const {
    // A slot of the new group's tags its own calls never reach (they count from 0).
    std::uint64_t slot = 0xF0000000ull + static_cast<std::uint64_t>(coordinator);
    return kCollectiveTagBit | (std::uint64_t{place_.group_id & 0x7FFF} << kGroupIdShift) | (slot << 16) |
           static_cast<std::uint64_t>(phase);
  }

  // The payload lives until the send is done, however this call ends.
  void send(int peer, Words words, int coordinator, Phase phase) {
    auto payload = std::make_shared<Words>(std::move(words));
    auto completion = place_.transport.isend(member(peer), payload->data(), payload->size() * sizeof(std::int32_t),
                                             tag(coordinator, phase));
    completion->when_done([payload] {});
  }
  Receive receive(int peer, int coordinator, Phase phase) {
    Receive receive{std::make_shared<Words>(static_cast<std::size_t>(2 * place_.size + 8)), nullptr};
    receive.completion = place_.transport.irecv(member(peer), receive.words->data(),
                                                receive.words->size() * sizeof(std::int32_t), tag(coordinator, phase));
    receive.completion->when_done([words = receive.words] {});
    return receive;
  }
  void withdraw(const Receive& receive) { place_.transport.cancel(receive.completion.get()); }

  // True once done; false when `peer` is lost. Throws when the transport stopped, at the
  // deadline, or when this rank, not bound yet, accepted to be left out by some coordinator.
  bool wait(const Receive& receive, int peer, Phase phase) {
    while (!settled_within(receive, std::chrono::milliseconds(20))) {
      check_deadline(peer, phase);
      throw_if_left_out();
    }
    return succeeded(receive);
  }
  // Thrown while this rank is not bound to a decision: its transport accepted a coordinator's
  // request to leave it out (and from then on this rank cannot bind to any).
  struct LeftOut {
    int by;  // that coordinator, as a transport rank
  };
  void throw_if_left_out() const {
    if (bound_) return;
    if (int by = place_.transport.groups().excluded_from(place_.group_id); by >= 0) throw LeftOut{by};
  }
  [[noreturn]] void throw_left_out(int by) const {
    throw PeerClosedError("shrink: rank " + std::to_string(by) +
                              ", coordinating, left this rank out of the group it is making (a survivor's list "
                              "named it); a rank left out does not join the new group",
                          ErrorContext{.rank = place_.rank, .peer = by, .op = "shrink"});
  }
  // A survivor waits for its coordinator a little past the timeout: a coordinator that gives up
  // on a silent rank at the timeout says which, and that verdict should arrive first.
  Clock::time_point deadline_for(Phase phase) const {
    bool from_coordinator = phase == Phase::Decide || phase == Phase::Commit;
    return from_coordinator ? deadline_ + std::min<Clock::duration>(place_.timeout, std::chrono::seconds(2))
                            : deadline_;
  }
  // Whether the transfer is done (completed or failed: succeeded() tells) within `limit`.
  static bool settled_within(const Receive& receive, std::chrono::milliseconds limit) {
    try {
      return receive.completion->wait_for(limit);
    } catch (const Error&) {
      return true;  // failed: a dead peer, which the caller handles
    }
  }
  bool succeeded(const Receive& receive) {
    if (!receive.completion->failed()) return true;
    if (auto stopped = place_.transport.failure(-1)) std::rethrow_exception(stopped);
    return false;
  }
  void check_deadline(int peer, Phase phase) {
    if (Clock::now() < deadline_for(phase)) return;
    throw TimeoutError("shrink: waited " + seconds_text(place_.timeout) + " for rank " + std::to_string(member(peer)) +
                           "'s " + to_string(phase) + silent_advice,
                       ErrorContext{.rank = place_.rank, .peer = member(peer), .op = "shrink"});
  }
  static constexpr const char* silent_advice =
      "; every survivor must call shrink, with the same ranks to exclude (is one alive but doing something else, "
      "or stopped?)";
  // Throws when `words`, what this rank waited for in `phase`, say the coordinator gave up.
  void throw_if_gave_up(int coordinator, const Words& words, Phase phase) const {
    if (words.empty() || words[0] != kGaveUp) return;
    if (words.size() < 3 || words[1] < 0 || words[1] >= place_.size || words[2] < 0 ||
        words[2] > static_cast<std::int32_t>(GaveUp::SurvivorExcluded)) {
      throw InternalError("shrink: a garbled agreement message");
    }
    int culprit = words[1];
    std::string head = "shrink: rank " + std::to_string(member(coordinator)) + ", coordinating, ";
    std::string who = "rank " + std::to_string(member(culprit));
    ErrorContext context{.rank = place_.rank, .peer = member(culprit), .op = "shrink"};
    switch (static_cast<GaveUp>(words[2])) {
      case GaveUp::Silent:
        throw TimeoutError(head + "waited " + seconds_text(place_.timeout) + " for " + who + "'s " +
                               to_string(phase == Phase::Decide ? Phase::Propose : Phase::Acknowledge) +
                               " and gave up, so no group was made" + silent_advice,
                           context);
      case GaveUp::Bound:
        throw MismatchError(
            head + "would leave out " + who + ", which is alive and bound to another decision" + differing_advice,
            context);
      case GaveUp::CoordinatorExcluded:
        throw MismatchError(head + "was left out by " + who + differing_advice, context);
      case GaveUp::SurvivorExcluded:
        throw MismatchError(head + "found that " + who + ", a survivor of its decision, had accepted to be left out" +
                                " by another coordinator" + differing_advice,
                            context);
    }
    throw InternalError("shrink: a garbled agreement message");
  }
  static constexpr const char* differing_advice =
      ", so no group was made; the survivors passed different ranks to exclude: every survivor must pass the same "
      "list (a rank it names does not call shrink, or gets an error if it does)";
  // Tells every rank still waiting on this coordinator (`waiting(peer)`) which rank made it give
  // up, and why.
  template <class Waiting>
  void tell_gave_up(int culprit, GaveUp why, Phase their_wait, Waiting waiting) {
    for (int peer = 0; peer < place_.size; ++peer) {
      if (peer != place_.rank && peer != culprit && waiting(static_cast<std::size_t>(peer))) {
        send(peer, {kGaveUp, culprit, static_cast<std::int32_t>(why)}, place_.rank, their_wait);
      }
    }
  }
  // This coordinator gives up over `culprit`: those still waiting on it in `their_wait` are
  // told, and it throws what they will.
  template <class Waiting>
  [[noreturn]] void give_up_telling(int culprit, GaveUp why, Phase their_wait, Waiting waiting) {
    tell_gave_up(culprit, why, their_wait, waiting);
    throw_if_gave_up(place_.rank, {kGaveUp, culprit, static_cast<std::int32_t>(why)}, their_wait);
    throw InternalError("shrink: gave up without a reason");  // unreachable: the words above throw
  }
  // The group rank of transport rank `transport_rank` (it is one of the group's).
  int group_rank_of(int transport_rank) const {
    for (int rank = 0; rank < place_.size; ++rank) {
      if (member(rank) == transport_rank) return rank;
    }
    throw InternalError("shrink: an agreement message names a rank outside the group");
  }
  [[noreturn]] void throw_excluded(int coordinator) {
    throw PeerClosedError(
        "shrink: this rank was excluded from the new group (the survivors found it dead, or "
        "were asked to exclude it; decided by rank " +
            std::to_string(member(coordinator)) + ")",
        ErrorContext{.rank = place_.rank, .op = "shrink"});
  }

  static Words encode(const std::vector<bool>& out, const std::optional<Decision>& pending) {
    Words words;
    words.push_back(static_cast<std::int32_t>(std::count(out.begin(), out.end(), true)));
    for (std::size_t rank = 0; rank < out.size(); ++rank) {
      if (out[rank]) words.push_back(static_cast<std::int32_t>(rank));
    }
    words.push_back(pending ? pending->coordinator : -1);
    words.push_back(pending ? static_cast<std::int32_t>(pending->out.size()) : 0);
    if (pending) words.insert(words.end(), pending->out.begin(), pending->out.end());
    return words;
  }
  // A list of ranks at `at`, checked against the group (a garbled message is an error, not a crash).
  std::vector<int> list_at(const Words& words, std::size_t& at) const {
    std::size_t count = at < words.size() ? static_cast<std::size_t>(std::max(words[at], 0)) : words.size();
    if (at + 1 + count > words.size()) throw InternalError("shrink: a garbled agreement message");
    std::vector<int> ranks(words.begin() + static_cast<std::ptrdiff_t>(at + 1),
                           words.begin() + static_cast<std::ptrdiff_t>(at + 1 + count));
    for (int rank : ranks) {
      if (rank < 0 || rank >= place_.size) throw InternalError("shrink: a garbled agreement message");
    }
    at += 1 + count;
    return ranks;
  }

  // A survivor's side: propose to `coordinator`, take its decision, acknowledge, wait for the
  // commit. Empty when the coordinator died meanwhile.
  std::optional<std::vector<int>> follow(int coordinator) {
    Receive decide = receive(coordinator, coordinator, Phase::Decide);
    send(coordinator, encode(out_, pending_), coordinator, Phase::Propose);
    try {
      if (!wait(decide, coordinator, Phase::Decide)) return std::nullopt;
    } catch (const LeftOut& left_out) {
      refuse_to_acknowledge(coordinator, left_out.by);
    }
    std::size_t at = 0;
    Words words = *decide.words;
    throw_if_gave_up(coordinator, words, Phase::Decide);
    Decision decision{coordinator, list_at(words, at)};
    if (std::find(decision.out.begin(), decision.out.end(), place_.rank) != decision.out.end()) {
      throw_excluded(coordinator);
    }
    // Bound from here: a coordinator's later request to leave this rank out is refused.
    if (int by = place_.transport.groups().bind_agreement(place_.group_id); by >= 0) refuse_to_acknowledge(coordinator, by);
    bound_ = true;
    pending_ = decision;
    Receive commit = receive(coordinator, coordinator, Phase::Commit);
    send(coordinator, {}, coordinator, Phase::Acknowledge);
    if (!wait(commit, coordinator, Phase::Commit)) return std::nullopt;
    throw_if_gave_up(coordinator, *commit.words, Phase::Commit);
    return decision.out;
  }
  // This rank accepted to be left out by coordinator `by` (its transport did) while following
  // `coordinator`: instead of an acknowledgement, which `coordinator` will wait for if its
  // decision keeps this rank in, it is told so, and gives up.
  [[noreturn]] void refuse_to_acknowledge(int coordinator, int by) {
    send(coordinator, {kLeftOut, group_rank_of(by)}, coordinator, Phase::Acknowledge);
    throw_left_out(by);
  }

  // The coordinator's side: the proposals, every live rank left out asked to accept it, then
  // bound, the decision sent, every survivor's acknowledgement, the commit.
  std::vector<int> coordinate() {
    std::vector<bool> proposed(static_cast<std::size_t>(place_.size), false);
    // Those that proposed wait for a decision: if this coordinator gives up, they learn why.
    auto give_up = [&](int culprit, GaveUp why) {
      give_up_telling(culprit, why, Phase::Decide, [&](std::size_t peer) { return proposed[peer]; });
    };
    // This coordinator accepted to be left out by another: its proposers learn it, and it says so.
    auto left_out_by = [&](int by) {
      tell_gave_up(group_rank_of(by), GaveUp::CoordinatorExcluded, Phase::Decide,
                   [&](std::size_t peer) { return proposed[peer]; });
      throw_left_out(by);
    };
    std::vector<int> out;
    try {
      out = gather_proposals(proposed);
    } catch (const LeftOut& left_out) {
      left_out_by(left_out.by);
    }
    std::vector<bool> in_decision_out(static_cast<std::size_t>(place_.size), false);
    for (int rank : out) in_decision_out[static_cast<std::size_t>(rank)] = true;
    if (in_decision_out[static_cast<std::size_t>(place_.rank)]) {
      give_up(left_out_by_ >= 0 ? left_out_by_ : place_.rank, GaveUp::CoordinatorExcluded);
    }
    try {
      if (int refused = ask_left_out(out); refused >= 0) give_up(refused, GaveUp::Bound);
    } catch (const LeftOut& left_out) {
      left_out_by(left_out.by);
    }
    if (int by = place_.transport.groups().bind_agreement(place_.group_id); by >= 0) left_out_by(by);
    bound_ = true;
    pending_ = Decision{place_.rank, out};

    // Told: every survivor, and every rank that proposed though out (so it hears it is).
    Words decision_words{static_cast<std::int32_t>(out.size())};
    decision_words.insert(decision_words.end(), out.begin(), out.end());
    std::vector<std::optional<Receive>> acknowledgements(static_cast<std::size_t>(place_.size));
    for (int peer = 0; peer < place_.size; ++peer) {
      if (peer == place_.rank) continue;
      bool survivor = !in_decision_out[static_cast<std::size_t>(peer)];
      if (survivor) acknowledgements[static_cast<std::size_t>(peer)] = receive(peer, place_.rank, Phase::Acknowledge);
      if (survivor || proposed[static_cast<std::size_t>(peer)]) {
        send(peer, decision_words, place_.rank, Phase::Decide);
      }
    }
    // Those waiting for the commit learn why there is none.
    auto give_up_commit = [&](int culprit, GaveUp why) {
      give_up_telling(culprit, why, Phase::Commit,
                      [&](std::size_t other) { return acknowledgements[other].has_value(); });
    };
    // A survivor dying now stays in the decision (its death revokes the new group).
    std::vector<int> acknowledged;
    for (int peer = 0; peer < place_.size; ++peer) {
      auto& acknowledgement = acknowledgements[static_cast<std::size_t>(peer)];
      try {
        if (!acknowledgement || !wait(*acknowledgement, peer, Phase::Acknowledge)) continue;
      } catch (const TimeoutError&) {
        give_up_commit(peer, GaveUp::Silent);
      }
      const Words& words = *acknowledgement->words;
      if (acknowledgement->completion->bytes() > 0 && !words.empty() && words[0] == kLeftOut) {
        give_up_commit(peer, GaveUp::SurvivorExcluded);
      }
      acknowledged.push_back(peer);
    }
    for (int peer : acknowledged) send(peer, {}, place_.rank, Phase::Commit);
    return out;
  }

  // Waits for every survivor's proposal (or death) and returns the ranks out: those known dead
  // or named by a list, or a decision a survivor carries from a coordinator before.
  std::vector<int> gather_proposals(std::vector<bool>& proposed) {
    std::vector<std::optional<Receive>> proposals(static_cast<std::size_t>(place_.size));
    for (int peer = 0; peer < place_.size; ++peer) {
      if (peer != place_.rank && !out_[static_cast<std::size_t>(peer)]) {
        proposals[static_cast<std::size_t>(peer)] = receive(peer, place_.rank, Phase::Propose);
      }
    }
    std::optional<Decision> adopted = pending_;
    while (!adopted) {
      int waiting_for = -1;
      for (int peer = 0; peer < place_.size; ++peer) {
        auto& proposal = proposals[static_cast<std::size_t>(peer)];
        if (!proposal || proposed[static_cast<std::size_t>(peer)] || out_[static_cast<std::size_t>(peer)]) continue;
        if (!proposal->completion->done()) {
          if (waiting_for < 0) waiting_for = peer;
          continue;
        }
        if (!succeeded(*proposal)) {
          out_[static_cast<std::size_t>(peer)] = true;  // died before proposing
          continue;
        }
        proposed[static_cast<std::size_t>(peer)] = true;
        std::size_t at = 0;
        Words words = *proposal->words;
        for (int rank : list_at(words, at)) {
          out_[static_cast<std::size_t>(rank)] = true;
          if (rank == place_.rank) left_out_by_ = peer;
        }
        int coordinator = at < words.size() ? words[at] : -1;
        at += 1;  // then the pending decision's list
        std::vector<int> pending = list_at(words, at);
        if (coordinator >= 0 && (!adopted || coordinator > adopted->coordinator)) {
          adopted = Decision{coordinator, pending};
          if (std::find(pending.begin(), pending.end(), place_.rank) != pending.end()) left_out_by_ = coordinator;
        }
      }
      if (adopted) break;
      if (waiting_for < 0) {
        // Every survivor proposed (or died): decide.
        Decision decision{place_.rank, {}};
        for (int rank = 0; rank < place_.size; ++rank) {
          if (out_[static_cast<std::size_t>(rank)]) decision.out.push_back(rank);
        }
        adopted = decision;
        break;
      }
      auto& proposal = proposals[static_cast<std::size_t>(waiting_for)];
      if (!settled_within(*proposal, std::chrono::milliseconds(20))) {
        try {
          check_deadline(waiting_for, Phase::Propose);
        } catch (const TimeoutError&) {
          // Those that proposed wait for a decision: they learn which rank stayed silent.
          tell_gave_up(waiting_for, GaveUp::Silent, Phase::Decide, [&](std::size_t peer) { return proposed[peer]; });
          throw;
        }
        throw_if_left_out();
      }
    }
    for (int peer = 0; peer < place_.size; ++peer) {
      if (auto& proposal = proposals[static_cast<std::size_t>(peer)];
          proposal && !proposed[static_cast<std::size_t>(peer)]) {
        withdraw(*proposal);
      }
    }
    return adopted->out;
  }

  // Asks every live rank in `out` to accept being left out (its transport answers): the first
  // that refuses (bound to another decision), or -1. One that does not answer within
  // kAnswerWait is stopped or dying, and is taken for dead: a rank that accepts can never bind
  // to a decision, and one already bound is kept from this decision's group by its own
  // coordinator's acceptance of being left out of it, asked before that coordinator bound.
  int ask_left_out(const std::vector<int>& out) {
    std::vector<std::pair<int, Receive>> asked;
    for (int rank : out) {
      if (rank == place_.rank || place_.transport.failure(member(rank))) continue;
      asked.emplace_back(rank, receive(rank, place_.rank, Phase::Exclusion));
      place_.transport.groups().ask_to_exclude(member(rank), place_.group_id, tag(place_.rank, Phase::Exclusion));
    }
    auto until = std::min<Clock::time_point>(Clock::now() + kAnswerWait, deadline_);
    for (auto& [rank, answer] : asked) {
      while (!settled_within(answer, std::chrono::milliseconds(20))) {
        throw_if_left_out();
        if (Clock::now() >= until) break;
      }
      if (!answer.completion->done()) {
        withdraw(answer);
        log::get(log::Subsystem::Algorithms)
            .warn("shrink: rank {} did not answer the request to leave it out within {}; taken for dead", member(rank),
                  seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(kAnswerWait)));
        continue;
      }
      if (!succeeded(answer)) continue;  // died
      if (answer.completion->bytes() < sizeof(std::int32_t) || (*answer.words)[0] != 1) return rank;
    }
    return -1;
  }

  const AgreementPlace& place_;
  std::vector<bool> out_;
  std::optional<Decision> pending_;
  Clock::time_point deadline_;
  bool bound_ = false;    // this rank bound itself to a decision (Transport::bind_agreement)
  int left_out_by_ = -1;  // a proposer whose list (or carried decision) leaves this coordinator out
};

}  // namespace

std::vector<int> agree_on_excluded(const AgreementPlace& place, const std::vector<int>& excluded) {
  return Agreement(place, excluded).run();
}

}  // namespace comm::algorithms
