// send/recv/isend/irecv over the TCP transport, ranks as threads: sizes, ordering, any source,
// many in flight, all pairs, buffers too small, timeouts and bad arguments.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <atomic>
#include <set>
#include <thread>

#include "tests/support/thread_ranks.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::pattern;
using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

std::vector<std::uint8_t> filled(int rank, int message, std::size_t bytes) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(rank, message, i);
  return data;
}

// Index of the first byte that differs from the pattern, or -1.
long long first_wrong(const std::vector<std::uint8_t>& data, int rank, int message, std::size_t bytes) {
  if (data.size() < bytes) return 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    if (data[i] != pattern(rank, message, i)) return static_cast<long long>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("messages of every size arrive intact", "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  std::size_t bytes =
      GENERATE(std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{64 * 1024},
               std::size_t{64 * 1024 + 1}, std::size_t{(1 << 20) + 3}, std::size_t{256} << 20);
  INFO(bytes << " bytes");
  RankChecks checks;
  std::atomic<long long> wrong{-2};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        if (group.rank() == 0) {
          auto data = filled(0, 1, bytes);
          group.send(comm::Buffer(data.data(), bytes, comm::DType::UInt8), 1, 3);
        } else {
          std::vector<std::uint8_t> data(bytes + 8, 0xEE);
          auto work = group.irecv(comm::Buffer(data.data(), data.size(), comm::DType::UInt8), 0, 3);
          work->wait();
          RANK_CHECK(checks, work->bytes() == bytes);
          RANK_CHECK(checks, work->source_rank() == 0);
          wrong = first_wrong(data, 0, 1, bytes);
          RANK_CHECK(checks, data[bytes] == 0xEE);  // nothing written past the message
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
  CHECK(wrong == -1);
}

TEST_CASE("a message over 4 GiB arrives intact", "[p2p][slow]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  const std::size_t bytes = (std::size_t{4} << 30) + 4099;
  std::atomic<long long> wrong{-2};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        if (group.rank() == 0) {
          auto data = filled(0, 2, bytes);
          group.send(comm::Buffer(data.data(), bytes, comm::DType::UInt8), 1);
        } else {
          std::vector<std::uint8_t> data(bytes);
          group.recv(comm::Buffer(data.data(), bytes, comm::DType::UInt8), 0);
          wrong = first_wrong(data, 0, 2, bytes);
        }
      },
      300s, transport);
  CHECK(wrong == -1);
}

TEST_CASE("1000 messages in flight keep their order per tag, eager and large mixed", "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  constexpr int kMessages = 1000;
  std::atomic<int> errors{0};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        auto size_of = [](int message) -> std::size_t {
          return message % 50 == 0 ? 100'000 + message : 16 + message % 7;
        };
        std::vector<std::vector<std::uint8_t>> buffers(kMessages);
        std::vector<std::shared_ptr<comm::Work>> works;
        if (group.rank() == 0) {
          for (int m = 0; m < kMessages; ++m) {
            buffers[m] = filled(0, m, size_of(m));
            works.push_back(
                group.isend(comm::Buffer(buffers[m].data(), buffers[m].size(), comm::DType::UInt8), 1, m % 5));
          }
        } else {
          // Post in another order than sent across tags, but in order within each tag.
          for (int tag = 4; tag >= 0; --tag) {
            for (int m = tag; m < kMessages; m += 5) {
              buffers[m].resize(size_of(m));
              works.push_back(
                  group.irecv(comm::Buffer(buffers[m].data(), buffers[m].size(), comm::DType::UInt8), 0, tag));
            }
          }
        }
        for (auto& work : works) work->wait();
        if (group.rank() == 1) {
          for (int m = 0; m < kMessages; ++m) {
            if (first_wrong(buffers[m], 0, m, size_of(m)) != -1) ++errors;
          }
        }
      },
      std::chrono::seconds(60), transport);
  CHECK(errors == 0);
}

TEST_CASE("large messages announced before their receive is posted arrive intact, from any source too", "[p2p]") {
  // Each announcement waits, unexpected, for its receive; the payload follows once matched.
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  const std::vector<std::size_t> sizes{64 * 1024 + 1, 200'000, (1 << 20) + 5};
  std::atomic<int> errors{0};
  RankChecks checks;
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        std::uint8_t go = 0;
        if (group.rank() == 0) {
          std::vector<std::vector<std::uint8_t>> data;
          std::vector<std::shared_ptr<comm::Work>> works;
          for (std::size_t m = 0; m < sizes.size(); ++m) {
            data.push_back(filled(0, static_cast<int>(m), sizes[m]));
            works.push_back(group.isend(comm::Buffer(data[m].data(), sizes[m], comm::DType::UInt8), 1, 5));
          }
          group.send(comm::Buffer(&go, 1, comm::DType::UInt8), 1, 6);  // after the announcements, on the same stream
          for (auto& work : works) work->wait();
        } else {
          group.recv(comm::Buffer(&go, 1, comm::DType::UInt8), 0, 6);
          std::this_thread::sleep_for(20ms);  // the heads are all in by now
          for (std::size_t m = 0; m < sizes.size(); ++m) {
            std::vector<std::uint8_t> in(sizes[m] + 8, 0xEE);
            auto work =
                group.irecv(comm::Buffer(in.data(), in.size(), comm::DType::UInt8), m == 1 ? comm::kAnySource : 0, 5);
            work->wait();
            RANK_CHECK(checks, work->bytes() == sizes[m]);
            RANK_CHECK(checks, work->source_rank() == 0);
            RANK_CHECK(checks, in[sizes[m]] == 0xEE);
            if (first_wrong(in, 0, static_cast<int>(m), sizes[m]) != -1) ++errors;
          }
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
  CHECK(errors == 0);
}

TEST_CASE("small sends that outrun the receiver fill the stream, reuse their buffer at once and arrive intact",
          "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  // ~12 MB of small messages: more than the shared-memory ring and the socket buffers hold, so
  // some are written in part and the rest queued, while the sender overwrites its one buffer.
  constexpr int kMessages = 12000;
  auto size_of = [](int message) -> std::size_t { return 1000 + static_cast<std::size_t>(message % 13); };
  std::atomic<int> errors{0};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        std::vector<std::uint8_t> buffer(2000);
        if (group.rank() == 0) {
          for (int m = 0; m < kMessages; ++m) {
            for (std::size_t i = 0; i < size_of(m); ++i) buffer[i] = pattern(0, m, i);
            group.send(comm::Buffer(buffer.data(), size_of(m), comm::DType::UInt8), 1, 4);
          }
        } else {
          std::this_thread::sleep_for(300ms);  // let the sender run ahead
          for (int m = 0; m < kMessages; ++m) {
            std::fill(buffer.begin(), buffer.end(), 0xEE);
            int source = group.recv(comm::Buffer(buffer.data(), buffer.size(), comm::DType::UInt8), 0, 4);
            bool intact = source == 0 && buffer[size_of(m)] == 0xEE;
            for (std::size_t i = 0; i < size_of(m) && intact; ++i) intact = buffer[i] == pattern(0, m, i);
            if (!intact) ++errors;
          }
        }
      },
      std::chrono::seconds(60), transport);
  CHECK(errors == 0);
}

TEST_CASE("all pairs exchange at once", "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  int ranks = GENERATE(2, 3, 5, 8);
  std::size_t bytes = GENERATE(std::size_t{10}, std::size_t{300'000});
  INFO(ranks << " ranks, " << bytes << " bytes");
  std::atomic<int> errors{0};
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        std::vector<std::vector<std::uint8_t>> out(ranks), in(ranks);
        std::vector<std::shared_ptr<comm::Work>> works;
        for (int peer = 0; peer < ranks; ++peer) {
          if (peer == me) continue;
          in[peer].resize(bytes);
          works.push_back(group.irecv(comm::Buffer(in[peer].data(), bytes, comm::DType::UInt8), peer, 1));
        }
        for (int peer = 0; peer < ranks; ++peer) {
          if (peer == me) continue;
          out[peer] = filled(me, peer, bytes);
          works.push_back(group.isend(comm::Buffer(out[peer].data(), bytes, comm::DType::UInt8), peer, 1));
        }
        for (auto& work : works) work->wait();
        for (int peer = 0; peer < ranks; ++peer) {
          if (peer != me && first_wrong(in[peer], peer, me, bytes) != -1) ++errors;
        }
      },
      std::chrono::seconds(60), transport);
  CHECK(errors == 0);
}

TEST_CASE("a receive from any source reports the sender", "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  int ranks = GENERATE(2, 4, 7);
  std::set<int> senders;
  std::atomic<int> errors{0};
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        if (group.rank() == 0) {
          for (int i = 1; i < ranks; ++i) {
            std::int32_t value = -1;
            int source = group.recv(comm::Buffer(&value, 1, comm::DType::Int32), comm::kAnySource, 5);
            if (value != source * 10) ++errors;
            senders.insert(source);
          }
        } else {
          std::int32_t value = group.rank() * 10;
          group.send(comm::Buffer(&value, 1, comm::DType::Int32), 0, 5);
        }
      },
      std::chrono::seconds(60), transport);
  CHECK(errors == 0);
  CHECK(static_cast<int>(senders.size()) == ranks - 1);
}

TEST_CASE("sending to oneself works", "[p2p]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> out{1.5f, 2.5f}, in(2);
    auto receive = group.irecv(in, group.rank(), 9);
    group.send(out, group.rank(), 9);
    receive->wait();
    RANK_CHECK(checks, in == out);
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("a receive buffer smaller than the message fails both sides", "[p2p][bad-input]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  SECTION("a large message: both Works fail") {
    std::string sender_error, receiver_error;
    run_ranks(
        2,
        [&](comm::ProcessGroup& group) {
          std::vector<std::uint8_t> data(1 << 20);
          try {
            if (group.rank() == 0) {
              group.send(comm::Buffer(data.data(), data.size(), comm::DType::UInt8), 1, 2);
            } else {
              group.recv(comm::Buffer(data.data(), 1000, comm::DType::UInt8), 0, 2);
            }
          } catch (const comm::Error& error) {
            (group.rank() == 0 ? sender_error : receiver_error) = error.what();
          }
        },
        std::chrono::seconds(60), transport);
    CHECK_THAT(sender_error, ContainsSubstring("1048576 bytes") && ContainsSubstring("1000"));
    CHECK_THAT(receiver_error, ContainsSubstring("1048576 bytes") && ContainsSubstring("holds 1000"));
  }
  SECTION("a large message announced before the receive is posted: both Works fail") {
    std::string sender_error, receiver_error;
    run_ranks(
        2,
        [&](comm::ProcessGroup& group) {
          std::vector<std::uint8_t> data(300'000);
          std::uint8_t go = 0;
          try {
            if (group.rank() == 0) {
              auto work = group.isend(comm::Buffer(data.data(), data.size(), comm::DType::UInt8), 1, 2);
              group.send(comm::Buffer(&go, 1, comm::DType::UInt8), 1, 4);
              work->wait();
            } else {
              group.recv(comm::Buffer(&go, 1, comm::DType::UInt8), 0, 4);
              group.recv(comm::Buffer(data.data(), 100'000, comm::DType::UInt8), 0, 2);
            }
          } catch (const comm::Error& error) {
            (group.rank() == 0 ? sender_error : receiver_error) = error.what();
          }
        },
        std::chrono::seconds(60), transport);
    CHECK_THAT(sender_error, ContainsSubstring("300000 bytes") && ContainsSubstring("100000"));
    CHECK_THAT(receiver_error, ContainsSubstring("300000 bytes") && ContainsSubstring("holds 100000"));
  }
  SECTION("an eager message: the receive fails, and so does the sender's next call to that peer") {
    std::string receiver_error, sender_error;
    run_ranks(
        2,
        [&](comm::ProcessGroup& group) {
          std::vector<std::uint8_t> data(100);
          if (group.rank() == 0) {
            group.send(comm::Buffer(data.data(), 100, comm::DType::UInt8), 1, 2);
            std::uint8_t flag = 0;
            try {
              group.recv(comm::Buffer(&flag, 1, comm::DType::UInt8), 1, 3);  // rank 1 answers after its failure
              group.send(comm::Buffer(data.data(), 100, comm::DType::UInt8), 1, 2);
            } catch (const comm::Error& error) {
              sender_error = error.what();
            }
          } else {
            try {
              group.recv(comm::Buffer(data.data(), 10, comm::DType::UInt8), 0, 2);
            } catch (const comm::Error& error) {
              receiver_error = error.what();
            }
            std::uint8_t flag = 1;
            group.send(comm::Buffer(&flag, 1, comm::DType::UInt8), 0, 3);
          }
        },
        std::chrono::seconds(60), transport);
    CHECK_THAT(receiver_error, ContainsSubstring("100 bytes") && ContainsSubstring("holds 10"));
    CHECK_THAT(sender_error, ContainsSubstring("did not fit"));
  }
}

TEST_CASE("a refused message fails the next collective on every rank, promptly", "[p2p][bad-input]") {
  // Rank 0's eager message does not fit rank 1's receive; the refusal then fails whatever rank 0
  // does next with rank 1. A collective that fails that way must end the group on both ranks,
  // not leave rank 1 waiting out its timeout for data rank 0 never sends.
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  std::string errors[2];
  std::chrono::steady_clock::duration took[2]{};
  std::atomic<bool> rank1_done{false};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        int me = group.rank();
        std::vector<std::uint8_t> data(100);
        std::uint8_t flag = 0;
        if (me == 0) {
          group.send(comm::Buffer(data.data(), 100, comm::DType::UInt8), 1, 2);
          // Rank 1 refuses only after this: a refusal that overtook the send (a busy machine
          // scheduling rank 1 first) would fail the send itself, which is not what is tested.
          group.send(comm::Buffer(&flag, 1, comm::DType::UInt8), 1, 4);
          group.recv(comm::Buffer(&flag, 1, comm::DType::UInt8), 1, 3);  // the refusal came before it
        } else {
          group.recv(comm::Buffer(&flag, 1, comm::DType::UInt8), 0, 4);
          try {
            group.recv(comm::Buffer(data.data(), 10, comm::DType::UInt8), 0, 2);
          } catch (const comm::Error&) {
          }
          group.send(comm::Buffer(&flag, 1, comm::DType::UInt8), 0, 3);
        }
        std::vector<float> values(1000, 1.0f);
        auto start = std::chrono::steady_clock::now();
        try {
          group.all_reduce(comm::Buffer(values.data(), values.size(), comm::DType::Float32), comm::ReduceOp::Sum,
                           "ring");
        } catch (const comm::Error& error) {
          errors[me] = error.what();
        }
        took[me] = std::chrono::steady_clock::now() - start;
        if (me == 1) rank1_done = true;
        // Rank 0 carries on with its group (as a program that caught the error would): rank 1 must
        // not need rank 0's exit to learn that the call failed.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (me == 0 && !rank1_done && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
      },
      std::chrono::seconds(30), transport);
  CHECK_THAT(errors[0], ContainsSubstring("did not fit"));
  CHECK_FALSE(errors[1].empty());
  CHECK(took[1] < std::chrono::seconds(10));
}

TEST_CASE("a wait that times out names the peer and the tag", "[p2p][bad-input]") {
  RankChecks checks;
  std::atomic<bool> done{false};
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        if (group.rank() == 0) {
          while (!done) std::this_thread::sleep_for(1ms);  // stay up: a departed peer is another error
        } else {
          std::uint8_t byte = 0;
          auto start = std::chrono::steady_clock::now();
          RANK_CHECK_THROWS(checks, group.recv(comm::Buffer(&byte, 1, comm::DType::UInt8), 0, 77), "from rank 0",
                            "tag 77", "[rank 1]");
          RANK_CHECK(checks, std::chrono::steady_clock::now() - start < 5s);
          done = true;
        }
      },
      400ms);
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("bad point-to-point arguments are rejected on the calling rank", "[p2p][bad-input]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> data(4);
    RANK_CHECK_THROWS(checks, group.send(data, 2), "rank 2 is not in this group");
    RANK_CHECK_THROWS(checks, group.send(data, -1), "rank -1 is not in this group");
    RANK_CHECK_THROWS(checks, group.recv(data, 5), "rank 5 is not in this group");
    RANK_CHECK_THROWS(checks, group.send(data, 1 - group.rank(), -3), "tag -3");
    RANK_CHECK_THROWS(checks, group.send(comm::Buffer(nullptr, 4, comm::DType::Float32), 1 - group.rank()),
                      "null pointer");
    // A dtype cast from a number outside the enumeration: an error, not a division by its size 0.
    RANK_CHECK_THROWS(checks, group.send(comm::Buffer(data.data(), 4, static_cast<comm::DType>(99)), 1 - group.rank()),
                      "dtype (99) is none of");
    RANK_CHECK_THROWS(
        checks,
        group.send(comm::Buffer(data.data(), 4, comm::DType::Float32, {comm::Device::Kind::Cuda, 0}), 1 - group.rank()),
        "cuda:0");
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("abort fails pending operations at once", "[p2p]") {
  RankChecks checks;
  std::atomic<bool> done{false};
  run_ranks(2, [&](comm::ProcessGroup& group) {
    if (group.rank() == 1) {
      while (!done) std::this_thread::sleep_for(1ms);
    } else {
      std::uint8_t byte = 0;
      auto work = group.irecv(comm::Buffer(&byte, 1, comm::DType::UInt8), 1, 1);
      group.abort();
      RANK_CHECK_THROWS(checks, work->wait(), "abort");
      RANK_CHECK_THROWS(checks, group.send(comm::Buffer(&byte, 1, comm::DType::UInt8), 1), "abort");
      done = true;
    }
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("operations complete in the background: is_completed turns true without wait", "[p2p]") {
  std::string transport = GENERATE("tcp", "shm");
  INFO("transport " << transport);
  RankChecks checks;
  run_ranks(
      2,
      [&](comm::ProcessGroup& group) {
        std::vector<std::uint8_t> data(300'000, static_cast<std::uint8_t>(group.rank() + 1));
        comm::Buffer buffer(data.data(), data.size(), comm::DType::UInt8);
        auto work = group.rank() == 0 ? group.isend(buffer, 1, 6) : group.irecv(buffer, 0, 6);
        auto deadline = std::chrono::steady_clock::now() + 20s;
        while (!work->is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
        RANK_CHECK(checks, work->is_completed());
        if (group.rank() == 1) RANK_CHECK(checks, data.front() == 1 && data.back() == 1);
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}
