// Matching arriving messages to posted receives, MPI-style, independent of the medium.
//
// Posted receives and unexpected messages (arrived before their receive) are kept in order,
// so for one (source, tag) the n-th message matches the n-th receive, and kAnySource receives
// take their turn in posting order. The caller serialises access (the transport's lock).
#pragma once

#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "libcomm/base/completion.hpp"
#include "libcomm/base/short_copy.hpp"
#include "transport/transport.hpp"

namespace comm::transport {

struct PostedReceive {
  int source = -1;  // or kAnySource
  std::uint64_t tag = 0;
  void* data = nullptr;
  std::size_t capacity = 0;
  std::shared_ptr<detail::Completion> completion;
  std::uint64_t fingerprint = 0;
  Combiner reduction;  // set: the message combines into `data` rather than overwriting it
};

// Delivers a whole message already in memory into a receive: copied, or combined (the payload
// need not be aligned to the element size). Inline: every small message arriving comes here.
inline void deliver(const PostedReceive& receive, const void* payload, std::size_t bytes) {
  if (receive.reduction) {
    combine_run(receive.reduction, static_cast<std::uint8_t*>(receive.data), static_cast<const std::uint8_t*>(payload),
                bytes / receive.reduction.element);
  } else {
    detail::copy_short(receive.data, payload, bytes);
  }
}

struct UnexpectedMessage {
  int source = -1;
  std::uint64_t tag = 0;
  std::size_t bytes = 0;
  bool rendezvous = false;  // only announced: the payload comes once the receiver asks for it
  std::uint64_t id = 0;     // the sender's id for a rendezvous message
  bool arrived = false;     // an eager payload fully read into `payload`
  std::vector<std::uint8_t> payload;
  std::optional<PostedReceive> claimed_by;  // a receive matched while the payload was arriving
  std::uint64_t fingerprint = 0;
  bool dropped = false;  // refused by the receive it matched while still arriving: discarded on arrival
  std::uint32_t lease = 0;  // a rendezvous message whose sender lent its buffer (lent_buffers.hpp)
};

// Whether two fingerprints belong to different calls (0 is "unknown" and agrees with anything).
inline bool conflicting(std::uint64_t a, std::uint64_t b) { return a != 0 && b != 0 && a != b; }
// Tags of one collective call share everything above their low 16 bits (the step).
inline bool same_call(std::uint64_t tag_a, std::uint64_t tag_b) { return (tag_a >> 16) == (tag_b >> 16); }

class Matcher {
 public:
  // A message announced by `source`: the earliest posted receive it satisfies, moved into
  // `into` (where its arrival keeps it: one move fewer per message) and removed; false if none.
  bool take_receive(int source, std::uint64_t tag, std::optional<PostedReceive>& into);
  // The same receive, matched in place: used where it lies, then removed (remove_matched) with
  // no move at all (a message delivered whole on arrival). nullptr if none.
  PostedReceive* match(int source, std::uint64_t tag);
  void remove_matched(PostedReceive* matched);
  // A new receive: the earliest unexpected message it satisfies (left in place, returned by
  // pointer so the caller can claim or consume it), or nullptr after storing the receive.
  UnexpectedMessage* find_unexpected(const PostedReceive& receive);
  UnexpectedMessage& add_unexpected(UnexpectedMessage message);
  void remove_unexpected(const UnexpectedMessage* message);
  bool has_unexpected() const { return !unexpected_.empty(); }
  void post(PostedReceive&& receive) {
    if (first_ >= kCompactFrom) [[unlikely]]
      compact();
    posted_.push_back(std::move(receive));
  }
  // Removes the posted receive completing `completion`; false when none is posted.
  bool withdraw(const detail::Completion* completion);

  // Posted receives from `source` (or any source) of the same call as `tag` whose fingerprint
  // conflicts with `fingerprint`, removed and returned.
  std::vector<PostedReceive> take_conflicting_receives(int source, std::uint64_t tag, std::uint64_t fingerprint);
  // An unexpected message of the same call as `receive` from its source whose fingerprint
  // conflicts with the receive's, or nullptr.
  const UnexpectedMessage* find_conflicting(const PostedReceive& receive) const;

  // Removes and returns the posted receives waiting on `source` (with any-source ones too when
  // `include_any_source`), so the caller can fail them.
  std::vector<PostedReceive> take_receives_from(int source, bool include_any_source);
  // Removes and returns the unexpected messages from `source` whose payload has not (fully)
  // arrived: announced large messages, and eager ones cut off mid-payload.
  std::vector<UnexpectedMessage> take_incomplete_from(int source);

  // A revoked group (transport.hpp's group_of): its posted receives, removed and returned, with
  // those that had claimed a message still arriving (the message is then dropped on arrival);
  // its unexpected messages dropped, but the announced ones, removed and returned, so the caller
  // can tell their senders.
  struct GroupTaken {
    std::vector<PostedReceive> receives;
    std::vector<UnexpectedMessage> announced;
  };
  GroupTaken take_group(std::uint32_t group);

 private:
  // A vector: usually a handful of receives, taken from the front; a deque allocated a node
  // every few messages. The live ones are posted_[first_..]: taking the first one only moves
  // first_ on (erasing it shifted every later receive: ~700 instructions a message with 64
  // posted), and the taken front is dropped once it is empty or half the vector. Taking the
  // last live one pops it, so the usual one-receive window never touches first_ at all.
  std::vector<PostedReceive> posted_;
  std::size_t first_ = 0;
  static constexpr std::size_t kCompactFrom = 32;
  auto live_begin() { return posted_.begin() + static_cast<std::ptrdiff_t>(first_); }
  void compact();
  std::list<UnexpectedMessage> unexpected_;  // a list: transports hold pointers into it
};

}  // namespace comm::transport
