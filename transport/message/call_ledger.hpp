// The record of the collective calls this rank took part in last (the slot of each: its group
// id and sequence number, with the call's fingerprint), against which the message layer checks
// every collective message and probe that arrives: a service with its own state, which answers
// questions and changes nothing else (what a mismatch does is MismatchWatch's: mismatch_watch.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

namespace comm::transport {

class CallLedger {
 public:
  // Notes that this rank sends or receives in the call of `tag` with `fingerprint`; true the
  // first time for that call (then what arrived of it before must be compared). Point-to-point
  // transfers (fingerprint 0, or a tag without the collective bit) are not calls.
  bool note(std::uint64_t tag, std::uint64_t fingerprint) {
    return is_collective(tag, fingerprint) && note_collective(tag, fingerprint);  // the test inline: every send pays it
  }
  static bool is_collective(std::uint64_t tag, std::uint64_t fingerprint) {
    return fingerprint != 0 && (tag >> 63) != 0;
  }
  // This rank's fingerprint for the call a collective message (or probe) of `tag` belongs to,
  // when it began that call with another one; 0 when nothing contradicts.
  // (Inline: every arriving collective message asks.)
  std::uint64_t contradiction(std::uint64_t tag, std::uint64_t fingerprint) const {
    if (!is_collective(tag, fingerprint)) return 0;
    std::uint64_t slot = tag >> 16;
    const CallRecord& record = calls_[record_index(slot)];
    return record.slot == slot && record.fingerprint != fingerprint ? record.fingerprint : 0;
  }

  // A group's calls run in order, so a few dozen cover whatever can still arrive.
  static constexpr std::size_t kRecordedCalls = 64;

 private:
  bool note_collective(std::uint64_t tag, std::uint64_t fingerprint);
  // Where a call's record lives: a call's slot is its group id and its sequence number, and a
  // group's calls run in order, so neighbours never collide.
  static std::size_t record_index(std::uint64_t slot) {
    return static_cast<std::size_t>((slot ^ (slot >> 32) * 31) % kRecordedCalls);
  }
  struct CallRecord {
    std::uint64_t slot = 0;
    std::uint64_t fingerprint = 0;
  };
  std::array<CallRecord, kRecordedCalls> calls_{};
};

// The error of a mismatch, as rank `rank` reports it: both calls, in words.
std::exception_ptr mismatch_error(int rank, std::uint64_t mine, int source, const std::string& source_name,
                                  std::uint64_t theirs);

}  // namespace comm::transport
