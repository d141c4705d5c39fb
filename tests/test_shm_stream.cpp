// The shared-memory ring between two ranks (transport/shm/shm_stream.hpp), both ends in one
// process: records across the wrap of the 32-bit sequence numbers, and a ring refilled many
// times over with the reader releasing room in batches. And the collectives' shared arena
// (transport/shm/shared_arena.hpp): whose slot size a group takes.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "comm/store.hpp"
#include "transport/shm/shared_arena.hpp"
#include "transport/shm/shm_pairs.hpp"
#include "transport/shm/shm_stream.hpp"

using namespace std::chrono_literals;
using comm::transport::SharedMemoryPairs;
using comm::transport::ShmPairEnd;
using comm::transport::ShmStream;
using comm::transport::Socket;

namespace {

struct StreamPair {
  std::unique_ptr<ShmStream> low, high;  // rank 0's end, rank 1's end
};

// Both ends of one pair, starting their records at `first_sequence`; each rank's receive ring
// from `budget` (4 MiB by default, the largest).
StreamPair make_pair_of_streams(std::uint32_t first_sequence,
                                std::size_t budget = comm::transport::kDefaultShmBudgetBytes) {
  std::string job = "shmstream" + std::to_string(::getpid()) + "xxxxxxxxxxxxxxxx";
  comm::HashStore store(std::chrono::seconds(5));
  ShmPairEnd low_end, high_end;
  std::thread high([&] {
    SharedMemoryPairs pairs(store, 1, 2, job, {true, true}, 5s, {}, budget);
    high_end = pairs.take(0);
  });
  {
    SharedMemoryPairs pairs(store, 0, 2, job, {true, true}, 5s, {}, budget);
    low_end = pairs.take(1);
  }
  high.join();
  int sockets[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0);
  return {std::make_unique<ShmStream>(std::move(low_end), Socket(sockets[0]), 1, "rank 1", first_sequence),
          std::make_unique<ShmStream>(std::move(high_end), Socket(sockets[1]), 0, "rank 0", first_sequence)};
}

std::size_t write(ShmStream& stream, const std::vector<std::uint8_t>& bytes) {
  iovec vector{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
  return stream.write_some(&vector, 1);
}

// Reads exactly `bytes` (records end each read_some; what is there arrives in a few calls).
std::vector<std::uint8_t> read(ShmStream& stream, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  std::size_t done = 0;
  for (int tries = 0; done < bytes && tries < 1000; ++tries) done += stream.read_some(out.data() + done, bytes - done);
  out.resize(done);
  return out;
}

std::vector<std::uint8_t> message(std::size_t bytes, int seed) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
  return data;
}

}  // namespace

TEST_CASE("records keep coming, in order, across the wrap of the sequence numbers", "[transport][shm]") {
  // Starts 5 records before 2^32: a reader that took the slot cleared for the record after the
  // last one (header word 0) for sequence 0 lost that record and misread the ones after it.
  auto pair = make_pair_of_streams(0xFFFF'FFFB);
  for (int i = 0; i < 20; ++i) {
    auto sent = message(8 + i, i);
    REQUIRE(write(*pair.low, sent) == sent.size());
    // The reader looks for the next record before and after it is written, as a poller does.
    CHECK(read(*pair.high, sent.size()) == sent);
    CHECK(read(*pair.high, 1).empty());
  }
}

TEST_CASE("a writer refills the ring many times over while the reader releases room in batches", "[transport][shm]") {
  // The largest ring (4 MiB), and the smallest a budget gives (64 KiB: records and release
  // batches of a quarter of it).
  std::size_t budget = GENERATE(comm::transport::kDefaultShmBudgetBytes, std::size_t{80} << 10);
  INFO("budget " << budget);
  auto pair = make_pair_of_streams(1, budget);
  // About 9 MiB through the ring in writes of 3000 bytes (cut where the ring ends or room
  // runs out), as far as room allows, then reads; the writer must always get room back.
  constexpr std::size_t kTotal = 9 << 20, kWrite = 3000;
  auto byte_at = [](std::size_t k) { return static_cast<std::uint8_t>((k * 2654435761u) >> 13); };
  std::size_t written = 0, read_bytes = 0, wrong = 0;
  int stalls = 0;
  std::vector<std::uint8_t> chunk(kWrite), in(64 * 1024);
  while (read_bytes < kTotal && stalls < 100) {
    bool moved = false;
    while (written < kTotal) {
      std::size_t length = std::min(kWrite, kTotal - written);
      for (std::size_t i = 0; i < length; ++i) chunk[i] = byte_at(written + i);
      iovec vector{chunk.data(), length};
      std::size_t n = pair.low->write_some(&vector, 1);
      if (n == 0) break;
      written += n;
      moved = true;
    }
    for (int i = 0; i < 50; ++i) {
      std::size_t n = pair.high->read_some(in.data(), in.size());
      if (n == 0) break;
      for (std::size_t j = 0; j < n; ++j) wrong += in[j] != byte_at(read_bytes + j);
      read_bytes += n;
      moved = true;
    }
    stalls = moved ? 0 : stalls + 1;
  }
  CHECK(read_bytes == kTotal);
  CHECK(wrong == 0);
}

TEST_CASE("a ring's size comes from the rank's budget shared among its peers", "[transport][shm]") {
  using comm::transport::ring_bytes_for;
  constexpr std::size_t kMiB = 1 << 20;
  CHECK(ring_bytes_for(64 * kMiB, 1) == 4 * kMiB);  // two ranks: as before the budget
  CHECK(ring_bytes_for(64 * kMiB, 15) == 4 * kMiB);
  CHECK(ring_bytes_for(64 * kMiB, 16) == 2 * kMiB);  // 16 x 4 MiB and the headers would not fit
  CHECK(ring_bytes_for(64 * kMiB, 31) == 2 * kMiB);
  CHECK(ring_bytes_for(64 * kMiB, 127) == kMiB / 2);
  CHECK(ring_bytes_for(64 * kMiB, 1000) == 64 * 1024);
  CHECK(ring_bytes_for(64 * kMiB, 1100) == 0);  // under 64 KiB each: no shared memory
  CHECK(ring_bytes_for(kMiB, 0) == 4 * kMiB);
  // Without a budget from the user: as before up to 8 ranks on a host, then the host's rings
  // stay near 512 MiB all together, and never below 64 KiB each.
  using comm::transport::default_shm_budget;
  auto host_rings = [&](std::size_t ranks) {
    return ranks * (ranks - 1) * ring_bytes_for(default_shm_budget(ranks), ranks - 1);
  };
  CHECK(ring_bytes_for(default_shm_budget(2), 1) == 4 * kMiB);
  CHECK(ring_bytes_for(default_shm_budget(8), 7) == 4 * kMiB);
  for (std::size_t ranks : {16, 32, 64}) {
    INFO(ranks << " ranks");
    CHECK(host_rings(ranks) <= 512 * kMiB);
    CHECK(host_rings(ranks) > 128 * kMiB);
  }
  CHECK(ring_bytes_for(default_shm_budget(100), 99) == 64 * 1024);
  CHECK(ring_bytes_for(default_shm_budget(128), 127) == 64 * 1024);
  CHECK(ring_bytes_for(default_shm_budget(512), 511) == 64 * 1024);
  // A container's 64 MiB /dev/shm: 8 ranks get 512 KiB rings while it is empty, smaller ones as
  // it fills, and every rank's segment within half its share.
  CHECK(ring_bytes_for(default_shm_budget(8, 64 * kMiB), 7) == kMiB / 2);
  CHECK(ring_bytes_for(default_shm_budget(8, 40 * kMiB), 7) == kMiB / 4);
  CHECK(default_shm_budget(8, 64 * kMiB) <= 4 * kMiB);
  CHECK(ring_bytes_for(default_shm_budget(64, 64 * kMiB), 63) == 0);  // no room: over TCP
}

// Issue 31: every pair of ranks on a host had an 8 MiB segment of its own, 4 GiB at 32 ranks.
// Now each rank's receive segment holds a ring per peer within its budget. Nine ranks as
// threads, 1088 KiB each (eight 128 KiB rings and their headers' page); every segment is measured, and every ordered
// pair carries 300 KiB (more than twice its ring) intact.
TEST_CASE("each rank's receive segment stays within its budget, and every pair carries data", "[transport][shm]") {
  constexpr int kRanks = 9;
  constexpr std::size_t kBudget = std::size_t{1088} << 10, kBytes = 300 * 1024;
  std::string job = "shmbudget" + std::to_string(::getpid()) + "xxxxxxxxxxxxxxxx";
  comm::HashStore store(std::chrono::seconds(10));
  std::vector<bool> same_host(kRanks, true);
  std::vector<std::vector<ShmPairEnd>> ends(kRanks, std::vector<ShmPairEnd>(kRanks));
  std::vector<std::size_t> ring_bytes(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      SharedMemoryPairs pairs(store, rank, kRanks, job, same_host, 10s, {}, kBudget);
      ring_bytes[rank] = pairs.ring_bytes();
      for (int peer = 0; peer < kRanks; ++peer) {
        if (peer != rank && pairs.has(peer)) ends[rank][peer] = pairs.take(peer);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    CHECK(ring_bytes[rank] == 128 * 1024);
    // The segment itself, opened through the path its rank published.
    std::string entry = store.get_string("shm/segment/" + std::to_string(rank));
    struct stat status {};
    REQUIRE(::stat(entry.substr(0, entry.find(' ')).c_str(), &status) == 0);
    CHECK(static_cast<std::size_t>(status.st_size) <= kBudget);
    CHECK(static_cast<std::size_t>(status.st_size) >= (kRanks - 1) * std::size_t{128 * 1024});
  }
  std::size_t wrong = 0, short_by = 0;
  for (int from = 0; from < kRanks; ++from) {
    for (int to = 0; to < kRanks; ++to) {
      if (from == to) continue;
      int sockets[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0);
      // Copies of the ends: each rank's end of a pair serves every test direction once.
      ShmPairEnd writer_end = ends[from][to], reader_end = ends[to][from];
      ShmStream writer(std::move(writer_end), Socket(sockets[0]), to, "rank " + std::to_string(to));
      ShmStream reader(std::move(reader_end), Socket(sockets[1]), from, "rank " + std::to_string(from));
      auto sent = message(kBytes, from * kRanks + to);
      std::vector<std::uint8_t> got(kBytes);
      std::size_t written = 0, read_bytes = 0;
      for (int stalls = 0; read_bytes < kBytes && stalls < 100;) {
        iovec vector{sent.data() + written, kBytes - written};
        std::size_t n = written < kBytes ? writer.write_some(&vector, 1) : 0;
        std::size_t m = reader.read_some(got.data() + read_bytes, kBytes - read_bytes);
        written += n;
        read_bytes += m;
        stalls = n + m > 0 ? 0 : stalls + 1;
      }
      short_by += kBytes - read_bytes;
      wrong += got != sent;
    }
  }
  CHECK(short_by == 0);
  CHECK(wrong == 0);
}

// COMM_SHM_SLOT_BYTES is read on every rank, but a layout that differed between ranks would have
// them read each other's slots at wrong offsets: rank 0's size is the group's.
TEST_CASE("every rank of an arena takes rank 0's slot size", "[transport][shm]") {
  constexpr int kRanks = 3;
  comm::HashStore store(std::chrono::seconds(10));
  std::vector<std::size_t> slot_bytes(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      std::size_t asked = rank == 0 ? 64 * 1024 : 1024 * 1024;
      auto arena = comm::transport::create_shared_arena(store, "arena", rank, kRanks, 10s, asked);
      slot_bytes[rank] = arena != nullptr ? arena->slot_bytes() : 0;
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(slot_bytes == std::vector<std::size_t>(kRanks, 64 * 1024));
}

// A slot size in the store that rank 0 would never publish (a stranger's, say) is not mapped.
TEST_CASE("a rank refuses an arena whose published slot size is not whole pages", "[transport][shm]") {
  for (std::string published : {"12345", "0", "abc", "1099511627776"}) {
    comm::HashStore store(std::chrono::seconds(10));
    store.set("arena/name", published + " /proc/1/fd/3");
    store.set("arena/usable", "0");
    auto arena = comm::transport::create_shared_arena(store, "arena", 1, 2, 10s, 64 * 1024);
    CHECK(arena == nullptr);
    CHECK(store.get_string("arena/mapped/1") == "0");
  }
}

TEST_CASE("a record lent in place is the one a read would give, and leaves only when released", "[transport][shm]") {
  // The smallest ring a budget gives (64 KiB, release batches of a quarter), refilled many
  // times: room must come back through released records as through read ones.
  auto pair = make_pair_of_streams(0xFFFF'FF00, std::size_t{80} << 10);
  std::vector<std::uint8_t> sent_stream, received_stream;
  std::uint32_t draw = 12345;
  auto next = [&] { return draw = draw * 1103515245u + 12345u; };
  int lent_whole = 0, stalls = 0;
  while (received_stream.size() < (4u << 20) && stalls < 100) {
    bool moved = false;
    // A few records of 1 to 300 bytes, as far as room allows.
    for (int i = 0; i < 8; ++i) {
      auto record = message(1 + next() % 300, static_cast<int>(sent_stream.size()));
      std::size_t n = write(*pair.low, record);  // a record may be cut where room runs out
      sent_stream.insert(sent_stream.end(), record.begin(), record.begin() + static_cast<std::ptrdiff_t>(n));
      moved = moved || n > 0;
      if (n < record.size()) break;
    }
    for (int i = 0; i < 16; ++i) {
      switch (next() % 4) {
        case 0: {  // lent and released: the record whole, as written
          auto lent = pair.high->lend_record();
          // Nothing arrived (empty), or a record begun by a read (nullopt): read instead.
          if (!lent || lent->empty()) break;
          received_stream.insert(received_stream.end(), lent->begin(), lent->end());
          pair.high->release_record();
          ++lent_whole;
          moved = true;
          break;
        }
        case 1:  // lent and left: the next read or lend gives it again
          (void)pair.high->lend_record();
          break;
        default: {  // read, partly (a record begun is not lent until it is finished)
          std::uint8_t in[200];
          std::size_t n = pair.high->read_some(in, 1 + next() % sizeof in);
          received_stream.insert(received_stream.end(), in, in + n);
          moved = moved || n > 0;
          break;
        }
      }
    }
    stalls = moved ? 0 : stalls + 1;
  }
  // Everything read: nothing has arrived, which a lend says with an empty record.
  while (received_stream.size() < sent_stream.size()) {
    std::uint8_t in[4096];
    std::size_t n = pair.high->read_some(in, sizeof in);
    if (n == 0) break;
    received_stream.insert(received_stream.end(), in, in + n);
  }
  auto none = pair.high->lend_record();
  REQUIRE(none.has_value());
  CHECK(none->empty());
  // A record begun by a read is not lent: the rest is read.
  auto record = message(100, 1);
  REQUIRE(write(*pair.low, record) == record.size());
  std::uint8_t first[10];
  REQUIRE(pair.high->read_some(first, sizeof first) == sizeof first);
  CHECK_FALSE(pair.high->lend_record().has_value());
  CHECK(read(*pair.high, 90) == std::vector<std::uint8_t>(record.begin() + 10, record.end()));
  REQUIRE(received_stream.size() >= (4u << 20));
  CHECK(std::equal(received_stream.begin(), received_stream.end(), sent_stream.begin()));
  CHECK(lent_whole > 1000);
}

TEST_CASE("payload of an earlier lap that looks like the next header is never read as one", "[transport][shm]") {
  // The smallest ring (64 KiB). Lap 1: records of 16 lines whose payload holds, where each of
  // their lines begins, the very header word the record written at that line in lap 2 will have
  // (one line per record there). Lap 2: after each record is read, a read finds nothing: the
  // writer cleared the next slot before publishing (ahead of time, or at the last moment).
  auto pair = make_pair_of_streams(1, std::size_t{80} << 10);
  constexpr std::size_t kCapacity = 64 << 10, kLine = 64, kBigRecord = 16 * kLine;
  constexpr std::uint32_t kLapOneRecords = kCapacity / kBigRecord;
  auto lap_two_header = [&](std::uint64_t position) {
    std::uint64_t sequence = 1 + kLapOneRecords + position / kLine;
    return (sequence << 32) | (kLine - 8);
  };
  std::size_t position = 0;
  for (std::uint32_t record = 0; record < kLapOneRecords; ++record, position += kBigRecord) {
    std::vector<std::uint8_t> payload(kBigRecord - 8, 0xAB);
    for (std::size_t line = 1; line < 16; ++line) {
      std::uint64_t word = lap_two_header(position + line * kLine);
      std::memcpy(payload.data() + line * kLine - 8, &word, sizeof word);
    }
    REQUIRE(write(*pair.low, payload) == payload.size());
    REQUIRE(read(*pair.high, payload.size()) == payload);
  }
  for (std::uint32_t record = 0; record < kCapacity / kLine - 2; ++record) {
    INFO("lap 2, record " << record);
    auto payload = message(kLine - 8, static_cast<int>(record));
    REQUIRE(write(*pair.low, payload) == payload.size());
    REQUIRE(read(*pair.high, payload.size()) == payload);
    std::uint8_t more[kLine];
    REQUIRE(pair.high->read_some(more, sizeof more) == 0);
  }
}
