// MismatchWatch (transport/message/mismatch_watch.hpp) inside a real MeshTransport, two ranks
// over in-memory streams in one process: a collective message that arrived before this rank
// began its call (or a probe), from a peer in another call of the same slot, stops this rank
// with a MismatchError as soon as the call begins, even when the call only sends (no receive of
// it will ever match the message), and a message of the same call that agrees stops nothing.
#include <catch2/catch_test_macros.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/error.hpp"
#include "transport/memory/memory_stream.hpp"
#include "transport/message/mesh_transport.hpp"

using comm::transport::MeshTransport;

namespace {

// A collective tag: the collective bit, group 0, slot `slot`, step `step`.
std::uint64_t collective_tag(std::uint64_t slot, std::uint64_t step) { return (std::uint64_t{1} << 63) | (slot << 16) | step; }

std::vector<std::shared_ptr<MeshTransport>> two_ranks() {
  auto streams = comm::transport::memory_stream_mesh(2);
  std::vector<std::shared_ptr<MeshTransport>> transports;
  for (int rank = 0; rank < 2; ++rank) {
    transports.push_back(MeshTransport::create(rank, {"rank 0", "rank 1"}, std::move(streams[rank]), {0, 0}));
  }
  return transports;
}

// Waits until rank 0 holds rank 1's message of `tag`'s call (conflict() compares it with a
// receive of fingerprint `probe_fingerprint`, which differs from the message's).
bool arrived(MeshTransport& transport, std::uint64_t tag, std::uint64_t probe_fingerprint) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    transport.progress(1);
    if (transport.conflict(1, tag, probe_fingerprint)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A MismatchError whose words say so.
bool is_mismatch(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const comm::Error& thrown) {
    return thrown.code() == comm::ErrorCode::Mismatch && std::string(thrown.what()).find("mismatch") != std::string::npos;
  }
}

}  // namespace

TEST_CASE("a call that only sends is stopped by an earlier message of its slot from another call",
          "[mismatch_watch]") {
  auto transports = two_ranks();
  constexpr std::uint64_t kMine = 0x1111, kTheirs = 0x2222;
  std::uint64_t payload = 7;
  // Rank 1 is in another call of slot 5 (a broadcast whose root it thinks is itself, say).
  REQUIRE(transports[1]->isend(0, &payload, sizeof payload, collective_tag(5, 0), kTheirs) != nullptr);
  REQUIRE(arrived(*transports[0], collective_tag(5, 0), kMine));
  REQUIRE_FALSE(transports[0]->poll());  // nothing noticed: rank 0 has not begun slot 5 yet

  // Rank 0 begins slot 5 by sending (it thinks it is the root): the call is noted, and the
  // message that came first contradicts it.
  auto send = transports[0]->isend(1, &payload, sizeof payload, collective_tag(5, 1), kMine);
  std::exception_ptr stopped = transports[0]->poll();
  REQUIRE(stopped);
  CHECK(is_mismatch(stopped));
  REQUIRE(send->done());
  CHECK(send->failed());
}

TEST_CASE("a call that only sends is stopped by an earlier probe of its slot from another call",
          "[mismatch_watch]") {
  auto transports = two_ranks();
  constexpr std::uint64_t kMine = 0x4444, kTheirs = 0x5555;
  // A probe (transport.hpp): never delivered, only kept by its channel and compared.
  REQUIRE(transports[1]->isend(0, nullptr, 0, collective_tag(7, comm::transport::kProbeStep), kTheirs) != nullptr);
  REQUIRE(arrived(*transports[0], collective_tag(7, 0), kMine));
  REQUIRE_FALSE(transports[0]->poll());
  std::uint64_t payload = 7;
  auto send = transports[0]->isend(1, &payload, sizeof payload, collective_tag(7, 1), kMine);
  std::exception_ptr stopped = transports[0]->poll();
  REQUIRE(stopped);
  CHECK(is_mismatch(stopped));
}

TEST_CASE("an earlier message of the same call stops nothing", "[mismatch_watch]") {
  auto transports = two_ranks();
  constexpr std::uint64_t kCall = 0x3333;
  std::uint64_t payload = 7, received = 0;
  REQUIRE(transports[1]->isend(0, &payload, sizeof payload, collective_tag(6, 0), kCall) != nullptr);
  REQUIRE(arrived(*transports[0], collective_tag(6, 0), kCall + 1));  // (a probe of another call)
  auto send = transports[0]->isend(1, &payload, sizeof payload, collective_tag(6, 1), kCall);
  CHECK_FALSE(transports[0]->poll());
  auto receive = transports[0]->irecv(1, &received, sizeof received, collective_tag(6, 0), kCall);
  REQUIRE(receive->done());
  CHECK_FALSE(receive->failed());
  CHECK(received == payload);
}
