// Several connections to one peer as one byte stream (transport/tcp/striped_stream.hpp), over
// socket pairs: bytes arrive whole and in order whatever the writes' and reads' sizes and
// however full each connection is; the descriptor the progress thread sleeps on wakes for the
// connection each direction waits on, not for another (a thread woken for those would spin);
// a connection that closes is a lost peer. And the rule that picks how many connections.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "comm/error.hpp"
#include "transport/tcp/socket_tuning.hpp"
#include "transport/tcp/striped_stream.hpp"

using comm::transport::Socket;
using comm::transport::SocketStream;
using comm::transport::StripedSocketStream;

namespace {

constexpr std::size_t kStripe = StripedSocketStream::kStripeBytes;

// `count` socket pairs with small send buffers, so that writes often stop part way.
struct Pairs {
  std::vector<Socket> near, far;
  explicit Pairs(int count) {
    for (int i = 0; i < count; ++i) {
      int ends[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0);
      int buffer = 32 * 1024;
      ::setsockopt(ends[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
      ::setsockopt(ends[1], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
      near.emplace_back(ends[0]);
      far.emplace_back(ends[1]);
    }
  }
};

StripedSocketStream striped(std::vector<Socket>& sockets) {
  std::vector<SocketStream> connections;
  for (auto& socket : sockets) connections.emplace_back(std::move(socket), 1, "rank 1 (test)");
  return StripedSocketStream(std::move(connections));
}

bool readable(int fd) {
  pollfd watched{fd, POLLIN, 0};
  return ::poll(&watched, 1, 0) == 1 && (watched.revents & POLLIN) != 0;
}

}  // namespace

TEST_CASE("a striped stream delivers every byte in order, whatever the sizes of writes and reads", "[transport]") {
  int count = GENERATE(2, 3, 4);
  unsigned seed = GENERATE(1u, 2u);
  INFO("connections " << count << ", seed " << seed);
  Pairs pairs(count);
  StripedSocketStream writer = striped(pairs.near);
  StripedSocketStream reader = striped(pairs.far);
  std::mt19937 random(seed);
  // Several stripes' worth, in pieces from 1 byte to more than a stripe.
  std::vector<std::uint8_t> sent(9 * kStripe + 12345), received(sent.size(), 0);
  for (auto& byte : sent) byte = static_cast<std::uint8_t>(random());
  std::size_t written = 0, read = 0;
  std::uniform_int_distribution<std::size_t> piece(1, kStripe + kStripe / 2);
  int idle_rounds = 0;
  while (read < sent.size()) {
    REQUIRE(idle_rounds < 1000);
    std::size_t moved = 0;
    if (written < sent.size()) {
      // One to three vectors, the first possibly empty.
      std::size_t total = std::min(piece(random), sent.size() - written);
      std::size_t first = random() % 2 == 0 ? 0 : std::min<std::size_t>(total, random() % (total + 1));
      std::size_t second = (total - first) / 2;
      iovec vectors[3] = {{sent.data() + written, first},
                          {sent.data() + written + first, second},
                          {sent.data() + written + first + second, total - first - second}};
      std::size_t n = writer.write_some(vectors, 3);
      REQUIRE(n <= total);
      written += n;
      moved += n;
    }
    std::size_t n = reader.read_some(received.data() + read, std::min(piece(random), sent.size() - read));
    read += n;
    moved += n;
    idle_rounds = moved == 0 ? idle_rounds + 1 : 0;
  }
  CHECK(written == sent.size());
  CHECK(std::memcmp(sent.data(), received.data(), sent.size()) == 0);
}

TEST_CASE("a striped stream wakes its sleeper only for the connection it waits on", "[transport]") {
  Pairs pairs(3);
  std::vector<int> raw;
  for (auto& socket : pairs.far) raw.push_back(socket.fd());
  StripedSocketStream reader = striped(pairs.near);
  // The reader waits on connection 0: bytes on connection 1 must not wake it.
  REQUIRE(reader.prepare_to_sleep(false));
  std::vector<std::uint8_t> stripe(kStripe, 7);
  REQUIRE(::send(raw[1], stripe.data(), 100, 0) == 100);
  CHECK_FALSE(readable(reader.wakeup_fd()));
  REQUIRE(::send(raw[0], stripe.data(), 100, 0) == 100);
  CHECK(readable(reader.wakeup_fd()));
  std::vector<std::uint8_t> into(200);
  CHECK(reader.read_some(into.data(), into.size()) == 100);  // stripe 0 is not over: it waits there
  REQUIRE(reader.prepare_to_sleep(false));
  CHECK_FALSE(readable(reader.wakeup_fd()));

  // A writer stuck on a full connection 0 sleeps until that one has room, not another.
  Pairs out(2);
  int far0 = out.far[0].fd();
  StripedSocketStream writer = striped(out.near);
  std::size_t sent = 0;
  while (true) {
    iovec vector{stripe.data(), kStripe - sent % kStripe};
    std::size_t n = writer.write_some(&vector, 1);
    sent += n;
    if (n < vector.iov_len) break;
  }
  REQUIRE(sent < kStripe);  // the socket pair holds less than a stripe: stuck in stripe 0
  REQUIRE(writer.prepare_to_sleep(true));
  CHECK_FALSE(readable(writer.wakeup_fd()));  // connection 1 has room, but it is not its turn
  std::vector<std::uint8_t> drain(kStripe);
  while (::recv(far0, drain.data(), drain.size(), 0) > 0) {
  }
  CHECK(readable(writer.wakeup_fd()));
  REQUIRE(writer.prepare_to_sleep(false));  // nothing queued: room is no news
  CHECK_FALSE(readable(writer.wakeup_fd()));
}

TEST_CASE("a striped stream whose peer closes fails with the peer's name", "[transport]") {
  Pairs pairs(2);
  StripedSocketStream reader = striped(pairs.near);
  pairs.far.clear();  // the peer's process ended
  std::uint8_t byte;
  try {
    reader.read_some(&byte, 1);
    FAIL("no error");
  } catch (const comm::PeerClosedError& error) {
    CHECK(std::string(error.what()).find("rank 1 (test)") != std::string::npos);
  }
  REQUIRE(reader.prepare_to_sleep(false));
  CHECK(readable(reader.wakeup_fd()));  // the end wakes the sleeper, which then reads it
  CHECK(reader.drained_to_end());
}

TEST_CASE("connections per peer cover the path's bandwidth-delay product", "[transport][tuner]") {
  using comm::transport::streams_for;
  constexpr double MiB = 1024 * 1024;
  // 1 Gbit/s across 40 ms with 3 MiB windows: 5 MB in flight needs 2 connections.
  CHECK(streams_for(0.125e9, 0.040, 3 * MiB) == 2);
  // 10 Gbit/s across 40 ms: 50 MB would need 16; the rule stops at its own limit.
  CHECK(streams_for(1.25e9, 0.040, 3 * MiB) == comm::transport::kMaxAutomaticStreams);
  // Within a data centre (100 us) one window covers even 100 Gbit/s.
  CHECK(streams_for(12.5e9, 100e-6, 3 * MiB) == 1);
  // Unknown round trip or window: one.
  CHECK(streams_for(1.25e9, 0, 3 * MiB) == 1);
  CHECK(streams_for(1.25e9, 0.040, 0) == 1);
}
