// The store's job secret: who gets past the handshake, and what a stranger may hold before it.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sys/resource.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "rendezvous/tcp_store_protocol.hpp"
#include "tests/support/raw_store_connection.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::RawConnection;
using comm::testing::resident_bytes;
namespace protocol = comm::tcp_store_protocol;
using Clock = std::chrono::steady_clock;

// Issue 15, finding 2: the store had no authentication, and a 30-line client read the job token
// out of it. With a job secret, nothing but a holder of the secret gets past the handshake.
namespace {

const std::string kSecret = "a-test-secret-of-more-than-16-characters";

comm::TcpStore client_with(std::uint16_t port, std::optional<std::string> secret) {
  return comm::TcpStore("127.0.0.1", port, comm::TcpStoreOptions{.timeout = 10s, .job_secret = std::move(secret)});
}

// A raw client that says hello and then proves the secret over the nonces it chooses.
struct Challenge {
  comm::Nonce server_nonce{};
  comm::Proof server_proof{};
};
Challenge hello_to_secured(RawConnection& raw, const comm::Nonce& client_nonce) {
  comm::Bytes reply = raw.say_hello(client_nonce);
  REQUIRE(!reply.empty());
  protocol::FrameReader reader(reply);
  REQUIRE(reader.type() == static_cast<std::uint8_t>(protocol::ResponseStatus::Ok));
  REQUIRE(reader.u32() == 1);
  Challenge challenge;
  auto nonce = reader.bytes();
  auto proof = reader.bytes();
  REQUIRE(nonce.size() == challenge.server_nonce.size());
  REQUIRE(proof.size() == challenge.server_proof.size());
  std::copy(nonce.begin(), nonce.end(), challenge.server_nonce.begin());
  std::copy(proof.begin(), proof.end(), challenge.server_proof.begin());
  return challenge;
}

comm::Bytes authenticate_frame(const comm::Proof& proof) {
  return protocol::FrameWriter(static_cast<std::uint8_t>(protocol::RequestType::Authenticate)).bytes(proof).finish();
}

comm::Bytes set_frame(const std::string& key, const std::string& value) {
  return protocol::FrameWriter(static_cast<std::uint8_t>(protocol::RequestType::Set)).bytes(key).bytes(value).finish();
}

}  // namespace

TEST_CASE("a store with a job secret serves only clients that prove they hold it", "[tcp_store][auth]") {
  comm::TcpStoreServer server(0, "127.0.0.1", kSecret);
  auto member = client_with(server.port(), kSecret);
  member.set("job/data", "private");
  CHECK(member.get_string("job/data") == "private");

  SECTION("a client without the secret is told what to do, at once") {
    auto start = Clock::now();
    CHECK_THROWS_WITH(
        client_with(server.port(), ""),
        ContainsSubstring("admits only processes that hold the job secret") && ContainsSubstring("COMM_JOB_TOKEN"));
    CHECK(Clock::now() - start < 3s);
  }
  SECTION("a client with another secret is refused") {
    CHECK_THROWS_WITH(client_with(server.port(), "another-secret-of-enough-length"),
                      ContainsSubstring("does not hold this job's secret"));
  }
  SECTION("a request before the proof closes the connection and changes nothing") {
    RawConnection raw(server.port());
    hello_to_secured(raw, comm::random_nonce());
    raw.send(set_frame("job/data", "overwritten"));
    CHECK(raw.closed_by_server());
  }
  SECTION("a wrong proof is refused, and the store is unchanged") {
    RawConnection raw(server.port());
    auto client_nonce = comm::random_nonce();
    auto challenge = hello_to_secured(raw, client_nonce);
    comm::JobSecret wrong("another-secret-of-enough-length");
    raw.send(authenticate_frame(wrong.prove(protocol::kClientProofPurpose, {client_nonce, challenge.server_nonce})));
    comm::Bytes reply = raw.read_reply();
    REQUIRE(!reply.empty());
    CHECK(reply[0] == static_cast<std::uint8_t>(protocol::ResponseStatus::Failure));
    CHECK(raw.closed_by_server());
  }
  SECTION("a recorded proof is refused on another connection (replay)") {
    comm::JobSecret secret(kSecret);
    auto client_nonce = comm::random_nonce();
    comm::Proof recorded;
    {
      RawConnection first(server.port());
      auto challenge = hello_to_secured(first, client_nonce);
      // The server proved itself over our nonce and its own.
      CHECK(
          secret.verify(challenge.server_proof, protocol::kServerProofPurpose, {challenge.server_nonce, client_nonce}));
      recorded = secret.prove(protocol::kClientProofPurpose, {client_nonce, challenge.server_nonce});
      first.send(authenticate_frame(recorded));
      comm::Bytes reply = first.read_reply();
      REQUIRE(!reply.empty());
      CHECK(reply[0] == static_cast<std::uint8_t>(protocol::ResponseStatus::Ok));
    }
    RawConnection replay(server.port());
    hello_to_secured(replay, client_nonce);  // the same client nonce, a fresh server nonce
    replay.send(authenticate_frame(recorded));
    comm::Bytes reply = replay.read_reply();
    REQUIRE(!reply.empty());
    CHECK(reply[0] == static_cast<std::uint8_t>(protocol::ResponseStatus::Failure));
  }
  SECTION("before its proof a connection may hold a few KiB, whatever it announces") {
    std::size_t before = resident_bytes();
    std::vector<std::unique_ptr<RawConnection>> strangers;
    for (int i = 0; i < 8; ++i) {
      strangers.push_back(std::make_unique<RawConnection>(server.port()));
      hello_to_secured(*strangers.back(), comm::random_nonce());
      strangers.back()->send(comm::Bytes{0x00, 0x00, 0x40, 0x06, 0x02});  // announces 100 MiB
    }
    for (auto& stranger : strangers) CHECK(stranger->closed_by_server());
    CHECK(resident_bytes() < before + (8u << 20));
  }
  SECTION("a connection that says hello and never proves itself is dropped after the deadline") {
    RawConnection silent(server.port(), 10);
    hello_to_secured(silent, comm::random_nonce());
    auto start = Clock::now();
    CHECK(silent.closed_by_server());
    CHECK(Clock::now() - start < protocol::kHelloDeadline + 3s);
  }
  CHECK(member.get_string("job/data") == "private");
}

TEST_CASE("a client holding a secret refuses a store that has none", "[tcp_store][auth]") {
  comm::TcpStoreServer open_server(0, "127.0.0.1", "");
  CHECK_THROWS_WITH(client_with(open_server.port(), kSecret), ContainsSubstring("runs without a job secret"));
  auto anyone = client_with(open_server.port(), "");
  anyone.set("k", "v");
  CHECK(anyone.get_string("k") == "v");
}

TEST_CASE("job secrets from the environment are checked", "[tcp_store][auth]") {
  CHECK_THROWS_WITH(comm::JobSecret("short"), ContainsSubstring("too short"));
  comm::JobSecret one = comm::JobSecret::generate(), two = comm::JobSecret::generate();
  CHECK(one.text().size() == 64);
  CHECK(one.text() != two.text());
  CHECK(one.job_id().size() == 16);
  CHECK(one.job_id() != two.job_id());
  CHECK(one.job_id() == comm::JobSecret(one.text()).job_id());
  CHECK(one.text().find(one.job_id()) == std::string::npos);
  comm::Nonce nonce = comm::random_nonce();
  CHECK(comm::parse_nonce(comm::nonce_text(nonce)) == nonce);
  CHECK_FALSE(comm::parse_nonce("xyz"));
  // A proof covers the purpose and the split of its parts.
  std::uint8_t ab[] = {'a', 'b'}, a[] = {'a'}, b[] = {'b'};
  CHECK(one.prove("p", {ab}) != one.prove("p", {a, b}));
  CHECK(one.prove("p", {ab}) != one.prove("q", {ab}));
  CHECK(one.verify(one.prove("p", {ab}), "p", {ab}));
  CHECK_FALSE(two.verify(one.prove("p", {ab}), "p", {ab}));
}

// Issue 27, item 3: what a local user could do to a store. Each needs thousands of connections
// at once (the test process may hold 20,000 descriptors here; it skips where it may not).
namespace {

bool may_hold_descriptors(rlim_t wanted) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= wanted) return true;
  if (limit.rlim_max < wanted) return false;
  limit.rlim_cur = wanted;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

TEST_CASE("strangers that never prove themselves cannot keep the job's ranks out", "[tcp_store][auth][security]") {
  if (!may_hold_descriptors(10000)) SKIP("needs 10,000 descriptors");
  comm::TcpStoreServer server(0, "127.0.0.1", kSecret);
  // More connections than the store ever holds, none of which says a word.
  std::vector<std::unique_ptr<RawConnection>> strangers;
  for (int i = 0; i < 4200; ++i) strangers.push_back(std::make_unique<RawConnection>(server.port()));
  auto started = Clock::now();
  auto rank = comm::TcpStore("127.0.0.1", server.port(), comm::TcpStoreOptions{.timeout = 3s, .job_secret = kSecret});
  rank.set("in", "yes");
  CHECK(rank.get_string("in") == "yes");
  CHECK(Clock::now() - started < 3s);
}

TEST_CASE("a store full of strangers' connections tells a newcomer why it is refused", "[tcp_store][security]") {
  if (!may_hold_descriptors(10000)) SKIP("needs 10,000 descriptors");
  comm::TcpStoreServer server(0, "127.0.0.1");  // no secret: anyone may say hello
  std::vector<std::unique_ptr<RawConnection>> strangers;
  for (int i = 0; i < 4100; ++i) {
    strangers.push_back(std::make_unique<RawConnection>(server.port()));
    strangers.back()->say_hello();
  }
  CHECK_THROWS_WITH(comm::TcpStore("127.0.0.1", server.port(), comm::TcpStoreOptions{.timeout = 3s}),
                    ContainsSubstring("already holds 4096 connections") && ContainsSubstring("COMM_JOB_TOKEN"));
  strangers.clear();  // once they go, the store serves again
  auto late = comm::TcpStore("127.0.0.1", server.port(), comm::TcpStoreOptions{.timeout = 10s});
  late.set("k", "v");
  CHECK(late.get_string("k") == "v");
}

TEST_CASE("the store's keys and values have a cap on the memory they take", "[tcp_store][security]") {
  ::setenv("COMM_STORE_MEMORY_MIB", "16", 1);
  comm::TcpStoreServer server(0, "127.0.0.1");
  ::unsetenv("COMM_STORE_MEMORY_MIB");
  auto store = comm::TcpStore("127.0.0.1", server.port(), comm::TcpStoreOptions{.timeout = 10s});
  std::vector<std::uint8_t> six_mib(6 << 20, 7);
  store.set("a", six_mib);
  store.set("b", six_mib);
  CHECK_THROWS_WITH(store.set("c", six_mib), ContainsSubstring("past its cap of 16 MiB"));
  CHECK_FALSE(store.check({"c"}));
  store.set("a", six_mib);  // replacing a value takes no more room
  CHECK(store.delete_key("b"));
  store.set("c", six_mib);  // what a deleted key held is free again
  CHECK(store.get("c") == six_mib);
}
