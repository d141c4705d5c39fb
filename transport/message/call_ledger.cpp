#include "transport/message/call_ledger.hpp"

#include "comm/error.hpp"
#include "libcomm/base/fingerprint.hpp"

namespace comm::transport {

bool CallLedger::note_collective(std::uint64_t tag, std::uint64_t fingerprint) {
  std::uint64_t slot = tag >> 16;
  CallRecord& record = calls_[record_index(slot)];
  if (record.slot == slot) return false;  // this call's every transfer after its first
  record = {slot, fingerprint};
  return true;
}

std::exception_ptr mismatch_error(int rank, std::uint64_t mine, int source, const std::string& source_name,
                                  std::uint64_t theirs) {
  return std::make_exception_ptr(MismatchError(
      "collective mismatch: rank " + std::to_string(rank) + " called " + detail::describe_fingerprint(mine) + " but " +
          source_name + " called " + detail::describe_fingerprint(theirs) +
          " in the same slot; every rank of a group must call the same collectives, in the same order, with matching "
          "arguments",
      ErrorContext{.rank = rank, .peer = source, .op = "collective"}));
}

}  // namespace comm::transport
