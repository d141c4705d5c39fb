// The message layer's services alone. Revocations (transport/message/revocations.hpp): a group
// is revoked once, with the cause's kind, message and rank; its members are the ones to tell; a
// lost peer takes down the groups it belongs to, unless its error is a mismatch; a new group
// clears what a stopping rank would still say. The call ledger (call_ledger.hpp): a call is noted
// once, and only a collective message of the same slot with another fingerprint contradicts it.
// Failures (failures.hpp): the first stop stands, with the Goodbye said for it.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>

#include "transport/message/call_ledger.hpp"
#include "transport/message/failures.hpp"
#include "transport/message/revocations.hpp"
#include "transport/transport.hpp"

using comm::ErrorCode;
using comm::transport::CallLedger;
using comm::transport::FrameKind;
using comm::transport::Revocations;

namespace {

ErrorCode code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const comm::Error& thrown) {
    return thrown.code();
  }
}

}  // namespace

TEST_CASE("a group is revoked once, over its cause, and its members are the ones to tell", "[revocations]") {
  Revocations revocations;
  revocations.add_group(3, {0, 2, 5});
  CHECK_FALSE(revocations.any());
  auto revocation = revocations.revoke(3, ErrorCode::PeerClosed, "rank 5 died", 5, 0);
  REQUIRE(revocation);
  CHECK(revocation->members == std::vector<int>{0, 2, 5});
  CHECK(revocation->frame.kind == FrameKind::Revoke);
  CHECK(revocation->frame.tag == 3);
  CHECK(revocation->frame.id == 1 + 5);
  CHECK(revocation->frame.extra == 1 + static_cast<std::uint64_t>(ErrorCode::PeerClosed));
  CHECK(*revocation->reason == "rank 5 died");
  CHECK(code_of(revocation->error) == ErrorCode::PeerClosed);
  CHECK(revocations.any());
  REQUIRE(revocations.of_group(3) != nullptr);
  CHECK(revocations.of_group(4) == nullptr);
  CHECK_FALSE(revocations.revoke(3, ErrorCode::Timeout, "again", -1, 0));  // once
  REQUIRE(revocations.unrecovered());
  CHECK(revocations.unrecovered()->peer() == 5);
  revocations.add_group(4, {0, 2});  // the survivors' new group
  CHECK_FALSE(revocations.unrecovered());
  CHECK(revocations.of_group(3) != nullptr);  // ids are never reused: still revoked
}

TEST_CASE("a lost peer takes down its groups over its own cause, but a mismatch revokes nothing", "[revocations]") {
  Revocations revocations;
  revocations.add_group(1, {0, 1, 2});
  revocations.add_group(2, {0, 2});
  revocations.add_group(3, {1, 2});
  auto groups = revocations.groups_of(1);
  std::sort(groups.begin(), groups.end());
  CHECK(groups == std::vector<std::uint32_t>{1, 3});
  auto relayed = std::make_exception_ptr(comm::PeerClosedError("rank 4 died", {.peer = 4}));
  auto cause = revocations.cause_of_loss(1, "rank 1", relayed);
  REQUIRE(cause);
  CHECK(cause->about == 4);  // the rank the error names, not the one that passed it on
  CHECK(cause->message == "rank 4 died");
  auto unnamed = revocations.cause_of_loss(1, "rank 1", std::make_exception_ptr(comm::IoError("reset")));
  REQUIRE(unnamed);
  CHECK(unnamed->about == 1);
  CHECK_FALSE(revocations.cause_of_loss(1, "rank 1", std::make_exception_ptr(comm::MismatchError("differ"))));
}

TEST_CASE("the ledger notes a call once and names this rank's call when a message of its slot differs",
          "[call_ledger]") {
  CallLedger ledger;
  std::uint64_t collective = std::uint64_t{1} << 63;
  std::uint64_t call = collective | (std::uint64_t{7} << 16), same_call_next_step = call | 3;
  std::uint64_t other_call = collective | (std::uint64_t{8} << 16);
  CHECK(ledger.contradiction(call, 0xBEEF) == 0);  // not begun here: nothing to contradict
  CHECK(ledger.note(call, 0xABC));
  CHECK_FALSE(ledger.note(same_call_next_step, 0xABC));  // its every transfer after the first
  CHECK(ledger.contradiction(same_call_next_step, 0xBEEF) == 0xABC);
  CHECK(ledger.contradiction(call, 0xABC) == 0);
  CHECK(ledger.contradiction(other_call, 0xBEEF) == 0);
  CHECK_FALSE(ledger.note(7 << 16, 0xABC));  // point to point: not a call
  CHECK_FALSE(ledger.note(other_call, 0));
  // A later call of the group in the same record replaces it.
  std::uint64_t later = collective | (std::uint64_t{7 + CallLedger::kRecordedCalls} << 16);
  CHECK(ledger.note(later, 0xDEF));
  CHECK(ledger.contradiction(call, 0xBEEF) == 0);
  auto error = comm::transport::mismatch_error(0, 0xABC, 1, "rank 1 (host:9)", 0xBEEF);
  try {
    std::rethrow_exception(error);
  } catch (const comm::MismatchError& mismatch) {
    CHECK(mismatch.peer() == 1);
    CHECK(std::string(mismatch.what()).find("but rank 1 (host:9) called") != std::string::npos);
  }
}

TEST_CASE("the first stop stands, and its goodbye is what late comers are told", "[failures]") {
  comm::transport::Failures failures;
  CHECK_FALSE(failures.stopped());
  failures.say({"rank 2 died", 1 + static_cast<std::uint64_t>(ErrorCode::PeerClosed), 1 + 2});
  failures.stop(std::make_exception_ptr(comm::PeerClosedError("rank 2 died")));
  failures.say({"destroyed", 0, 0});
  failures.stop(std::make_exception_ptr(comm::InternalError("later")));
  REQUIRE(failures.stopped());
  CHECK(code_of(failures.stopped()) == ErrorCode::PeerClosed);
  CHECK(failures.farewell().reason == "rank 2 died");
  CHECK(failures.farewell().about == 3);
}
