// Large messages in one copy (transport/lent_buffers.hpp): the lease protocol on its own (a
// lent buffer is read whole at most once, and a read its owner withdrew from never counts), and
// inside two real message layers over in-memory streams (the receiver reads the sender's
// buffer; where it cannot, the two-copy path carries the message; a send withdrawn while its
// receiver reads fails on both sides).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "comm/error.hpp"
#include "transport/lent_buffers.hpp"
#include "transport/memory/memory_stream.hpp"
#include "transport/message/mesh_transport.hpp"

using comm::transport::Lease;
using comm::transport::LentBuffers;
using comm::transport::LentSlots;
using comm::transport::MeshTransport;

namespace {

int plain_copy(std::int64_t, std::uint64_t address, void* into, std::size_t bytes) {
  std::memcpy(into, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address)), bytes);
  return 0;
}

int refused(std::int64_t, std::uint64_t, void*, std::size_t) { return EPERM; }

// Both ends of one pair, as two processes' views of the shared tables would be.
struct Pair {
  explicit Pair(comm::transport::ReadLent read = plain_copy)
      : owner(&tables[0], &tables[1], read), reader(&tables[1], &tables[0], read) {}
  LentSlots tables[2];
  LentBuffers owner, reader;
};

std::vector<std::uint8_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint8_t> data(bytes);
  std::mt19937 random(seed);
  for (auto& byte : data) byte = static_cast<std::uint8_t>(random());
  return data;
}

}  // namespace

TEST_CASE("a lent buffer is read whole once, and its owner learns that it was", "[lent]") {
  Pair pair;
  auto data = pattern(100'000, 1);
  Lease lease = pair.owner.offer(data.data(), data.size());
  REQUIRE(lease.id() != 0);
  std::vector<std::uint8_t> into(data.size());
  REQUIRE(pair.reader.fetch(lease.id(), into.data(), into.size()) == LentBuffers::Fetch::Done);
  CHECK(into == data);
  // Taken: a second read of the same lease gets nothing.
  CHECK(pair.reader.fetch(lease.id(), into.data(), into.size()) == LentBuffers::Fetch::Withdrawn);
  CHECK(lease.settle());
  CHECK(lease.id() == 0);
  CHECK_FALSE(lease.settle());  // once only
}

TEST_CASE("a lease withdrawn before the read voids it, and a reused slot does not answer for it", "[lent]") {
  Pair pair;
  auto first = pattern(4096, 2), second = pattern(4096, 3);
  Lease old_lease = pair.owner.offer(first.data(), first.size());
  std::uint32_t old_id = old_lease.id();
  CHECK_FALSE(old_lease.settle());  // withdrawn: nobody read it
  Lease new_lease = pair.owner.offer(second.data(), second.size());  // the same slot, a new generation
  REQUIRE(new_lease.id() != old_id);
  REQUIRE((new_lease.id() & (LentSlots::kSlots - 1)) == (old_id & (LentSlots::kSlots - 1)));
  std::vector<std::uint8_t> into(first.size());
  CHECK(pair.reader.fetch(old_id, into.data(), into.size()) == LentBuffers::Fetch::Withdrawn);
  REQUIRE(pair.reader.fetch(new_lease.id(), into.data(), into.size()) == LentBuffers::Fetch::Done);
  CHECK(into == second);
  // More than was lent is never read.
  Lease small = pair.owner.offer(first.data(), 16);
  CHECK(pair.reader.fetch(small.id(), into.data(), 17) == LentBuffers::Fetch::Unable);
}

TEST_CASE("leases run out at the table's size and come back when settled or dropped", "[lent]") {
  Pair pair;
  std::uint8_t byte = 0;
  std::vector<Lease> leases;
  for (std::uint32_t i = 0; i < LentSlots::kSlots; ++i) {
    leases.push_back(pair.owner.offer(&byte, 1));
    REQUIRE(leases.back().id() != 0);
  }
  CHECK(pair.owner.offer(&byte, 1).id() == 0);  // full: the two-copy path
  leases.pop_back();                            // dropped: settled
  Lease again = pair.owner.offer(&byte, 1);
  CHECK(again.id() != 0);
  // A settled lease's slot is free for the peer to see too: its old id reads nothing.
  std::uint32_t id = leases.front().id();
  leases.front().settle();
  CHECK(pair.reader.fetch(id, &byte, 1) == LentBuffers::Fetch::Withdrawn);
}

TEST_CASE("a reader refused the owner's memory says so, and the owner stops lending", "[lent]") {
  Pair pair(refused);
  std::uint8_t byte = 7, into = 0;
  Lease lease = pair.owner.offer(&byte, 1);
  REQUIRE(lease.id() != 0);
  CHECK(pair.reader.fetch(lease.id(), &into, 1) == LentBuffers::Fetch::Unable);
  CHECK_FALSE(lease.settle());  // still the owner's: it sends the bytes through the stream instead
  CHECK(pair.owner.offer(&byte, 1).id() == 0);
}

TEST_CASE("a lease naming another process than the peer's is not read", "[lent]") {
  LentSlots tables[2];
  LentBuffers owner(&tables[0], &tables[1], plain_copy);
  LentBuffers reader(&tables[1], &tables[0], plain_copy, /*peer=*/1);  // no process here has pid 1
  std::uint8_t byte = 7, into = 0;
  Lease lease = owner.offer(&byte, 1);  // names this process
  CHECK(reader.fetch(lease.id(), &into, 1) == LentBuffers::Fetch::Unable);
  CHECK(into == 0);
  CHECK_FALSE(lease.settle());
}

// The guarantee single copy rests on: the owner changes its buffer as soon as a withdrawal
// succeeds; a read that reports Done must have seen the buffer as it was lent.
TEST_CASE("racing reads and withdrawals: every read that counts saw the lent bytes unchanged", "[lent]") {
  Pair pair;
  constexpr std::size_t kBytes = 64 * 1024;
  constexpr int kRounds = 2000;
  std::vector<std::uint8_t> buffer(kBytes), into(kBytes);
  std::atomic<std::uint32_t> offered{0};
  std::atomic<int> round_done{-1};
  int done = 0, withdrawn = 0, corrupted = 0, other = 0;  // counted by the reader, checked after it
  std::thread reader([&] {
    for (int round = 0; round < kRounds; ++round) {
      std::uint32_t id;
      while ((id = offered.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      offered.store(0, std::memory_order_relaxed);
      auto fetched = pair.reader.fetch(id, into.data(), kBytes);
      if (fetched == LentBuffers::Fetch::Done) {
        ++done;
        auto value = static_cast<std::uint8_t>(round);
        if (std::any_of(into.begin(), into.end(), [&](std::uint8_t byte) { return byte != value; })) ++corrupted;
      } else if (fetched == LentBuffers::Fetch::Withdrawn) {
        ++withdrawn;
      } else {
        ++other;
      }
      round_done.store(round, std::memory_order_release);
    }
  });
  std::mt19937 random(11);
  for (int round = 0; round < kRounds; ++round) {
    std::memset(buffer.data(), static_cast<std::uint8_t>(round), kBytes);
    Lease lease = pair.owner.offer(buffer.data(), kBytes);
    REQUIRE(lease.id() != 0);
    offered.store(lease.id(), std::memory_order_release);
    for (unsigned spin = random() % 20000; spin > 0; --spin) std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!lease.settle()) std::memset(buffer.data(), 0xEE, kBytes);  // ours again at once
    while (round_done.load(std::memory_order_acquire) != round) std::this_thread::yield();
  }
  reader.join();
  INFO(done << " reads counted, " << withdrawn << " withdrawn first");
  CHECK(corrupted == 0);
  CHECK(other == 0);
  CHECK(done + withdrawn == kRounds);
}

namespace {

std::vector<std::shared_ptr<MeshTransport>> two_ranks(comm::transport::ReadLent read) {
  auto streams = comm::transport::memory_stream_mesh(2, 256 << 10, read);
  std::vector<std::shared_ptr<MeshTransport>> transports;
  for (int rank = 0; rank < 2; ++rank) {
    transports.push_back(MeshTransport::create(rank, {"rank 0", "rank 1"}, std::move(streams[rank]), {0, 0}));
  }
  return transports;
}

std::atomic<int> reads{0};
int counted_copy(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes) {
  ++reads;
  return plain_copy(owner, address, into, bytes);
}
int counted_refusal(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes) {
  ++reads;
  return refused(owner, address, into, bytes);
}

// Sends `sizes` from rank 0 to rank 1 with receives posted before (`posted_first`) or after the
// announcements arrived; checks every byte. `fingerprint`: 0 point to point, else a collective's.
void exchange(std::vector<std::shared_ptr<MeshTransport>>& ranks, const std::vector<std::size_t>& sizes,
              bool posted_first, std::uint64_t fingerprint = 0) {
  // A collective's messages carry its tag (top bit, a step per message) and fingerprint.
  auto tag = [&](std::size_t i) { return fingerprint != 0 ? (std::uint64_t{1} << 63) | (9u << 16) | i : i; };
  std::vector<std::vector<std::uint8_t>> sent, received;
  std::vector<std::shared_ptr<comm::detail::Completion>> sends, receives;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], static_cast<unsigned>(i + 10)));
    received.emplace_back(sizes[i]);
  }
  auto post = [&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) receives.push_back(ranks[1]->irecv(0, received[i].data(), sizes[i], tag(i), fingerprint));
  };
  if (posted_first) post();
  for (std::size_t i = 0; i < sizes.size(); ++i) sends.push_back(ranks[0]->isend(1, sent[i].data(), sizes[i], tag(i), fingerprint));
  if (!posted_first) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the announcements arrive unexpected
    post();
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(receives[i]->wait_for(std::chrono::seconds(10)));
    receives[i]->rethrow_if_failed();
    REQUIRE(sends[i]->wait_for(std::chrono::seconds(10)));
    sends[i]->rethrow_if_failed();
    CHECK(receives[i]->bytes() == sizes[i]);
    CHECK(received[i] == sent[i]);
  }
}

}  // namespace

TEST_CASE("large messages between two message layers are read from the sender's memory", "[lent]") {
  auto ranks = two_ranks(counted_copy);
  for (bool posted_first : {true, false}) {
    INFO("receives posted " << (posted_first ? "before" : "after") << " the announcements");
    // Point to point up to 128 KiB, a collective's up to 16 MiB (frame_receiver.cpp, worth_reading).
    reads = 0;
    exchange(ranks, {(64 << 10) + 1, 128 << 10}, posted_first);
    CHECK(reads.load() == 2);
    reads = 0;
    exchange(ranks, {(64 << 10) + 1, 1 << 20, 3'000'001, 16 << 20}, posted_first, 0xF1F1);
    CHECK(reads.load() == 4);
    // Beyond those, and small ones, go through the stream.
    reads = 0;
    exchange(ranks, {8, 64 << 10, (128 << 10) + 1, 3'000'001}, posted_first);
    exchange(ranks, {(16 << 20) + 1}, posted_first, 0xF1F1);
    CHECK(reads.load() == 0);
  }
}

TEST_CASE("where the receiver cannot read the sender's memory, large messages take two copies, intact", "[lent]") {
  auto ranks = two_ranks(counted_refusal);
  reads = 0;
  exchange(ranks, {(64 << 10) + 1, 100'000}, true);
  int refusals = reads.load();  // the second may be announced before the first refusal or after
  CHECK((refusals == 1 || refusals == 2));
  exchange(ranks, {100'000, 2 << 20}, false, 0xF1F1);
  CHECK(reads.load() == refusals);  // the first refusal stopped the lending
}

namespace {

// Rank 0's transport, for the reader below to revoke its group in the middle of a read.
MeshTransport* revoking_owner = nullptr;
int read_then_withdraw(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes) {
  plain_copy(owner, address, into, bytes);
  if (revoking_owner != nullptr) {
    std::exchange(revoking_owner, nullptr)
        ->groups()
        .revoke(0, comm::RevokedError("revoked by the test while its message was being read", {.rank = 0}));
  }
  return 0;
}

}  // namespace

TEST_CASE("a send withdrawn while its receiver reads fails on both sides, and the read is not delivered", "[lent]") {
  auto ranks = two_ranks(read_then_withdraw);
  for (auto& rank : ranks) rank->groups().add_group(0, {0, 1});  // so that rank 0 tells rank 1
  auto data = pattern(100'000, 5);
  std::vector<std::uint8_t> into(data.size());
  revoking_owner = ranks[0].get();
  auto send = ranks[0]->isend(1, data.data(), data.size(), 1);
  auto receive = ranks[1]->irecv(0, into.data(), into.size(), 1);
  CHECK_THROWS_AS(send->wait_for(std::chrono::seconds(10)), comm::RevokedError);
  CHECK_THROWS_AS(receive->wait_for(std::chrono::seconds(10)), comm::RevokedError);
  CHECK(revoking_owner == nullptr);  // the read happened
  CHECK(receive->failed());
}
