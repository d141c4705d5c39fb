// The shared-memory ring between two ranks (transport/shm/shm_stream.hpp), both ends in one
// process: records across the wrap of the 32-bit sequence numbers, and a ring refilled many
// times over with the reader releasing room in batches.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "comm/store.hpp"
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

// Both ends of one pair, starting their records at `first_sequence`.
StreamPair make_pair_of_streams(std::uint32_t first_sequence) {
  std::string job = "shmstream" + std::to_string(::getpid()) + "xxxxxxxxxxxxxxxx";
  comm::HashStore store(std::chrono::seconds(5));
  ShmPairEnd low_end, high_end;
  std::thread high([&] {
    SharedMemoryPairs pairs(store, 1, 2, job, {true, true}, 5s);
    high_end = pairs.take(0);
  });
  {
    SharedMemoryPairs pairs(store, 0, 2, job, {true, true}, 5s);
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
  auto pair = make_pair_of_streams(1);
  // About 9 MiB through a 4 MiB ring in writes of 3000 bytes (cut where the ring ends or room
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
