// Connections made on first use (transport/tcp/lazy_connector.hpp) as ranks of threads: what the
// mesh hands over to them, and the races between a rank through init and one still in it.
#include <catch2/catch_test_macros.hpp>

#include <atomic>
#include <thread>

#include "comm/store.hpp"
#include "transport/tcp/lazy_connector.hpp"
#include "transport/tcp/tcp_mesh.hpp"

using namespace std::chrono_literals;
using comm::transport::LazyConnector;
using comm::transport::Mesh;
using comm::transport::MeshOptions;
using comm::transport::PeerConnector;

namespace {

using Clock = std::chrono::steady_clock;

// One rank's view of the job's store: every call goes to the shared one, except that the word
// "every rank is connected" is not seen here until the test releases it. So this rank stays in
// the mesh's wait for the others while they are through and start using their connections.
class HeldBackStore final : public comm::Store {
 public:
  explicit HeldBackStore(comm::Store& shared) : shared_(shared) {}
  std::string describe() const override { return "HeldBackStore"; }
  std::atomic<bool> released{false};
  std::atomic<int> held{0};  // how often the word was asked for and held back

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override { shared_.set(key, value); }
  comm::Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override {
    return shared_.get(key, timeout);
  }
  std::int64_t do_add(const std::string& key, std::int64_t delta) override { return shared_.add(key, delta); }
  comm::Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                             std::span<const std::uint8_t> desired) override {
    return shared_.compare_set(key, expected, desired);
  }
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    shared_.wait(keys, timeout);
  }
  bool do_check(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) {
      if (key == "mesh/connected/all" && !released) {
        ++held;
        return false;
      }
    }
    return shared_.check(keys);
  }
  bool do_delete_key(const std::string& key) override { return shared_.delete_key(key); }
  std::int64_t do_num_keys() override { return shared_.num_keys(); }

 private:
  comm::Store& shared_;
};

MeshOptions lazy_options(int rank, int size) {
  MeshOptions options;
  options.rank = rank;
  options.size = size;
  options.secret = comm::JobSecret("a test secret of more than 16 characters");
  options.secret_from_user = true;
  options.route_to_host = "127.0.0.1";
  options.host = "one host";
  options.timeout = 10s;
  options.connect_lazily = true;
  options.shared_memory = false;
  return options;
}

std::unique_ptr<LazyConnector> connector_of(Mesh& mesh, const MeshOptions& options) {
  std::vector<bool> connected(static_cast<std::size_t>(options.size), false);
  for (int peer = 0; peer < options.size; ++peer) connected[peer] = mesh.sockets[peer].valid();
  return std::make_unique<LazyConnector>(options, std::move(mesh.listener), mesh.listener_nonce, mesh.addresses,
                                         std::move(connected), std::move(mesh.early));
}

struct Progress {
  std::vector<int> connected;
  std::vector<std::string> lost;
  void advance(PeerConnector& connector) {
    std::vector<PeerConnector::Connected> made;
    std::vector<PeerConnector::Lost> gone;
    connector.advance(made, gone);
    for (auto& connection : made) connected.push_back(connection.peer);
    for (auto& loss : gone) lost.push_back("rank " + std::to_string(loss.peer) + ": " + loss.reason);
  }
};

}  // namespace

// Seen in the fault suite (kill-init, lazy tcp, 4 ranks): a rank through init that asked a
// higher one to connect while that one still waited for the others in the mesh's accept loop
// had its request refused there as a stranger's hello, took the closed socket for the higher
// rank's death, and the job reported the wrong rank as dead.
TEST_CASE("a request to connect that comes while the asked rank is still making the mesh is answered") {
  constexpr int kSize = 4;  // ranks 1 and 3 are no neighbours: they connect on first use
  comm::HashStore shared;
  HeldBackStore held_back(shared);
  std::vector<Mesh> meshes(kSize);
  std::vector<std::string> errors(kSize);
  std::vector<std::thread> ranks;
  std::atomic<int> through{0};
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        comm::Store& store = rank == 3 ? static_cast<comm::Store&>(held_back) : shared;
        meshes[rank] = comm::transport::connect_mesh(store, lazy_options(rank, kSize));
      } catch (const std::exception& error) {
        errors[rank] = error.what();
      }
      ++through;
    });
  }
  auto guard = [&](auto condition, std::chrono::milliseconds limit) {
    for (auto deadline = Clock::now() + limit; !condition() && Clock::now() < deadline;)
      std::this_thread::sleep_for(1ms);
    return condition();
  };
  // However the test ends, rank 3 is let go and every thread joined.
  struct Joiner {
    HeldBackStore& store;
    std::vector<std::thread>& threads;
    void join() {
      store.released = true;
      for (auto& thread : threads) {
        if (thread.joinable()) thread.join();
      }
    }
    ~Joiner() { join(); }
  } joiner{held_back, ranks};
  REQUIRE(guard([&] { return through.load() == kSize - 1; }, 10s));
  REQUIRE(held_back.held.load() > 0);  // rank 3 is still in the mesh's wait

  // Rank 1 asks rank 3 for a connection while rank 3 still waits; rank 3's loop takes the request.
  auto rank1 = connector_of(meshes[1], lazy_options(1, kSize));
  Progress progress1;
  rank1->want(3);
  for (auto until = Clock::now() + 300ms; Clock::now() < until;) {
    progress1.advance(*rank1);
    std::this_thread::sleep_for(1ms);
  }
  joiner.join();
  for (int rank = 0; rank < kSize; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    REQUIRE(errors[rank].empty());
  }

  auto rank3 = connector_of(meshes[3], lazy_options(3, kSize));
  Progress progress3;
  guard(
      [&] {
        progress1.advance(*rank1);
        progress3.advance(*rank3);
        return (progress1.connected.size() == 1 && progress3.connected.size() == 1) || !progress1.lost.empty() ||
               !progress3.lost.empty();
      },
      5s);
  CHECK(progress1.lost == std::vector<std::string>{});
  CHECK(progress3.lost == std::vector<std::string>{});
  CHECK(progress1.connected == std::vector<int>{3});
  CHECK(progress3.connected == std::vector<int>{1});
}
