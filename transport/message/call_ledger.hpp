// The record of the collective calls this rank took part in last (the slot of each: its group
// id and sequence number, with the call's fingerprint), against which the message layer checks
// every collective message and probe that arrives: a service with its own state, which answers
// questions and changes nothing else (what a mismatch does is the layer's: mesh_mismatch.cpp).
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
  std::uint64_t contradiction(std::uint64_t tag, std::uint64_t fingerprint) const;

  // A group's calls run in order, so a few dozen cover whatever can still arrive.
  static constexpr std::size_t kRecordedCalls = 64;

 private:
  bool note_collective(std::uint64_t tag, std::uint64_t fingerprint);
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
