// Store semantics, the same for all four stores: every test runs against each of them.
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include "comm/store.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;

namespace {

// Each fixture hands out clients of one store; clients of one fixture see the same keys.
struct HashFixture {
  std::shared_ptr<comm::HashStore> store = std::make_shared<comm::HashStore>(10s);
  std::shared_ptr<comm::Store> client() { return store; }
};

struct PrefixFixture {
  std::shared_ptr<comm::HashStore> store = std::make_shared<comm::HashStore>(10s);
  std::shared_ptr<comm::Store> client() { return std::make_shared<comm::PrefixStore>("job", store); }
};

struct FileFixture {
  comm::testing::TemporaryDirectory directory;
  std::string path = (directory.path() / "store").string();
  std::shared_ptr<comm::Store> client() { return std::make_shared<comm::FileStore>(path, 10s); }
};

struct TcpFixture {
  comm::TcpStoreServer server{0, "127.0.0.1"};
  std::shared_ptr<comm::Store> client() {
    return std::make_shared<comm::TcpStore>("127.0.0.1", server.port(), comm::TcpStoreOptions{.timeout = 10s});
  }
};

#define ALL_STORES HashFixture, PrefixFixture, FileFixture, TcpFixture

}  // namespace

TEMPLATE_TEST_CASE("set then get returns the bytes, zeros included", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  comm::Bytes value{0, 1, 2, 0, 255};
  store->set("k", value);
  CHECK(store->get("k") == value);
  store->set("k", "second");
  CHECK(store->get_string("k") == "second");
  store->set("empty", "");
  CHECK(store->get("empty").empty());
  CHECK(fixture.client()->get_string("k") == "second");
}

TEMPLATE_TEST_CASE("get blocks until another client sets the key", "[store]", ALL_STORES) {
  TestType fixture;
  auto waiter = fixture.client();
  auto setter = fixture.client();
  std::atomic<bool> set_done{false};
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    set_done = true;
    setter->set("late", "here");
  });
  CHECK(waiter->get_string("late") == "here");
  CHECK(set_done);
  later.join();
}

TEMPLATE_TEST_CASE("get and wait time out naming the missing keys", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  store->set("present", "1");
  auto start = std::chrono::steady_clock::now();
  try {
    store->wait({"present", "absent-a", "absent-b"}, 300ms);
    FAIL("wait returned for keys that were never set");
  } catch (const comm::TimeoutError& error) {
    std::string message = error.what();
    CHECK_THAT(message, ContainsSubstring("absent-a'") && ContainsSubstring("absent-b'"));
    CHECK_THAT(message, !ContainsSubstring("present'"));
    CHECK(error.op() == "store.wait");
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 290ms);
  CHECK(elapsed < 5s);
  CHECK_THROWS_AS(store->get("absent-a", 100ms), comm::TimeoutError);
  store->set_timeout(100ms);
  CHECK_THROWS_WITH(store->get("absent-c"), ContainsSubstring("absent-c'") && ContainsSubstring("store.get"));
}

TEMPLATE_TEST_CASE("add counts from zero, stores decimal text, rejects non-counters", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  CHECK(store->add("counter", 5) == 5);
  CHECK(store->add("counter", -7) == -2);
  CHECK(store->add("counter", 0) == -2);
  CHECK(store->get_string("counter") == "-2");
  store->set("word", "hello");
  CHECK_THROWS_AS(store->add("word", 1), comm::InvalidArgumentError);
  CHECK(store->get_string("word") == "hello");
  // Issue 27 (found by fuzz/store_server): a counter past int64 is refused, not wrapped.
  store->add("big", std::numeric_limits<std::int64_t>::max());
  CHECK_THROWS_WITH(store->add("big", 1), ContainsSubstring("range of a 64-bit counter"));
  CHECK(store->add("big", -1) == std::numeric_limits<std::int64_t>::max() - 1);
}

TEMPLATE_TEST_CASE("compare_set follows torch.distributed's rules", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  // Missing key, non-empty expectation: nothing stored, the expectation comes back.
  CHECK(store->compare_set("k", "x", "y") == "x");
  CHECK_FALSE(store->check({"k"}));
  // Missing key, empty expectation: stored.
  CHECK(store->compare_set("k", "", "first") == "first");
  // Wrong expectation: unchanged, the current value comes back.
  CHECK(store->compare_set("k", "nope", "second") == "first");
  CHECK(store->get_string("k") == "first");
  // Right expectation: replaced.
  CHECK(store->compare_set("k", "first", "second") == "second");
  CHECK(store->get_string("k") == "second");
}

TEMPLATE_TEST_CASE("compare_set races elect exactly one winner", "[store]", ALL_STORES) {
  TestType fixture;
  constexpr int kClients = 16;
  std::vector<std::shared_ptr<comm::Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(fixture.client());
  std::vector<std::string> seen(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready < kClients) std::this_thread::yield();
      seen[i] = clients[i]->compare_set("leader", "", "client-" + std::to_string(i));
    });
  }
  for (auto& thread : threads) thread.join();
  std::string winner = fixture.client()->get_string("leader");
  CHECK(std::set<std::string>(seen.begin(), seen.end()) == std::set<std::string>{winner});
}

TEMPLATE_TEST_CASE("64 clients adding concurrently reach the exact total", "[store]", ALL_STORES) {
  TestType fixture;
  constexpr int kClients = 64;
  constexpr int kAddsEach = 25;
  std::vector<std::shared_ptr<comm::Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(fixture.client());
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kAddsEach; ++n) clients[i]->add("total", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(fixture.client()->add("total", 0) == kClients * kAddsEach);
}

TEMPLATE_TEST_CASE("check, delete_key and num_keys", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  std::int64_t before = store->num_keys();
  store->set("a", "1");
  store->set("b", "2");
  CHECK(store->num_keys() == before + 2);
  CHECK(store->check({"a", "b"}));
  CHECK_FALSE(store->check({"a", "c"}));
  CHECK(store->delete_key("a"));
  CHECK_FALSE(store->delete_key("a"));
  CHECK_FALSE(store->check({"a"}));
  CHECK(store->num_keys() == before + 1);
  CHECK_THROWS_AS(store->get("a", 50ms), comm::TimeoutError);
}

TEMPLATE_TEST_CASE("oversized keys and values are rejected with the limit named", "[store]", ALL_STORES) {
  TestType fixture;
  auto store = fixture.client();
  std::string long_key(comm::kMaxStoreKeyBytes + 1, 'k');
  CHECK_THROWS_WITH(store->set(long_key, "v"), ContainsSubstring(std::to_string(comm::kMaxStoreKeyBytes)));
  CHECK_THROWS_AS(store->get(long_key), comm::InvalidArgumentError);
  CHECK_THROWS_AS(store->set("", "v"), comm::InvalidArgumentError);
  comm::Bytes huge(comm::kMaxStoreValueBytes + 1);
  CHECK_THROWS_WITH(store->set("big", huge), ContainsSubstring(std::to_string(comm::kMaxStoreValueBytes)));
  CHECK_THROWS_AS(store->wait({"x"}, -1ms), comm::InvalidArgumentError);
  // "Forever" is capped rather than overflowing a deadline.
  store->set("now", "1");
  store->wait({"now"}, std::chrono::milliseconds::max());
  // A value at the limit is fine.
  comm::Bytes largest(comm::kMaxStoreValueBytes, 7);
  store->set("largest", largest);
  CHECK(store->get("largest") == largest);
}

TEST_CASE("PrefixStores over one store do not see each other's keys", "[store]") {
  auto base = std::make_shared<comm::HashStore>(1s);
  comm::PrefixStore job_a("a", base), job_b("b", base);
  job_a.set("k", "from a");
  job_b.set("k", "from b");
  CHECK(job_a.get_string("k") == "from a");
  CHECK(job_b.get_string("k") == "from b");
  CHECK(base->get_string("a/k") == "from a");
  CHECK_FALSE(job_b.check({"only-a"}));
  CHECK_THROWS_WITH(job_b.get("only-a", 50ms), ContainsSubstring("b/only-a"));
  CHECK_THROWS_AS(comm::PrefixStore("x", nullptr), comm::InvalidArgumentError);
}

// Issue 27: a store file in a shared directory must not be redirectable or readable by others.
static unsigned mode_of(const std::filesystem::path& path) {
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  return status.st_mode & 07777;
}

TEST_CASE("FileStore refuses a path another user could have redirected or can read", "[store][security]") {
  comm::testing::TemporaryDirectory directory;
  auto path = directory.path() / "store";
  auto target = directory.path() / "target";
  {
    comm::FileStore store(path.string(), 1s);
    store.set("k", "v");
    CHECK(mode_of(path) == 0600);
  }
  SECTION("a symbolic link at the path is never followed") {
    std::filesystem::create_symlink(target, path);
    CHECK_THROWS_WITH(comm::FileStore(path.string(), 1s), ContainsSubstring("symbolic link"));
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(target)));
  }
  SECTION("a second hard link is refused") {
    { std::ofstream(target.string()); }
    std::filesystem::permissions(target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::create_hard_link(target, path);
    CHECK_THROWS_WITH(comm::FileStore(path.string(), 1s), ContainsSubstring("2 hard links"));
  }
  SECTION("a file others may write is refused") {
    { std::ofstream(path.string()); }
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::others_write);
    CHECK_THROWS_WITH(comm::FileStore(path.string(), 1s), ContainsSubstring("grants more than 0600"));
  }
  SECTION("a file of another user is refused") {
    if (::geteuid() != 0) SKIP("needs root to give a file away");
    { std::ofstream(path.string()); }
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    CHECK_THROWS_WITH(comm::FileStore(path.string(), 1s), ContainsSubstring("belongs to uid 65534"));
  }
  SECTION("a file of this user made readable by umask is used, and then readable only by its owner") {
    { std::ofstream(path.string()); }
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read | std::filesystem::perms::others_read);
    comm::FileStore store(path.string(), 1s);
    store.set("k", "v");
    CHECK(mode_of(path) == 0600);
  }
}
