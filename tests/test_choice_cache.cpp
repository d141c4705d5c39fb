// The group's memo of the tuner's answers: a hit only for the same collective, size and
// requested algorithm; cleared on demand; and never a torn answer while threads race on a slot.
#include <catch2/catch_test_macros.hpp>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "algorithms/choice_cache.hpp"

using comm::Algorithm;
using comm::Collective;
using comm::algorithms::Choice;
using comm::algorithms::ChoiceCache;
using comm::algorithms::CollectiveContext;
using comm::algorithms::HostCall;
using comm::algorithms::Resources;

namespace {

using comm::algorithms::AlgorithmEntry;
using comm::algorithms::Hearing;
using comm::algorithms::Requirement;

void first_run(const CollectiveContext&, const HostCall&, const Resources&) {}
void second_run(const CollectiveContext&, const HostCall&, const Resources&) {}
// Rows of a table of their own: the cache hands back the row (its entry point and whether the
// call needs a confirmation) as stored.
constexpr AlgorithmEntry first_entry{Collective::AllReduce, Algorithm::Ring, Requirement::None, Hearing::EveryRank,
                                     first_run};
constexpr AlgorithmEntry second_entry{Collective::Broadcast, Algorithm::Tree, Requirement::None, Hearing::Partial,
                                      second_run};

ChoiceCache::Answer answer(Algorithm algorithm, std::size_t chunk, const AlgorithmEntry* entry) {
  return {Choice{algorithm, chunk, chunk * 2, Algorithm::Tree}, entry};
}

}  // namespace

TEST_CASE("the cache answers only the question it was told the answer to") {
  ChoiceCache cache;
  CHECK_FALSE(cache.find(Collective::AllReduce, 8, Algorithm::Auto));
  cache.store(Collective::AllReduce, 8, Algorithm::Auto, answer(Algorithm::RecursiveDoubling, 4096, &first_entry));

  auto hit = cache.find(Collective::AllReduce, 8, Algorithm::Auto);
  REQUIRE(hit);
  CHECK(hit->choice.algorithm == Algorithm::RecursiveDoubling);
  CHECK(hit->choice.chunk_bytes == 4096);
  CHECK(hit->choice.link_chunk_bytes == 8192);
  CHECK(hit->choice.across_hosts == Algorithm::Tree);
  CHECK(hit->entry == &first_entry);
  CHECK(hit->entry->run == &first_run);

  CHECK_FALSE(cache.find(Collective::AllReduce, 16, Algorithm::Auto));  // another size
  CHECK_FALSE(cache.find(Collective::AllReduce, 8, Algorithm::Ring));   // another request
  CHECK_FALSE(cache.find(Collective::Broadcast, 8, Algorithm::Auto));   // another collective

  // Each collective keeps its own answer; a new answer for one replaces only that one.
  cache.store(Collective::Broadcast, 8, Algorithm::Auto, answer(Algorithm::Tree, 1, &second_entry));
  cache.store(Collective::AllReduce, 1 << 20, Algorithm::Ring, answer(Algorithm::Ring, 2 << 20, &second_entry));
  CHECK_FALSE(cache.find(Collective::AllReduce, 8, Algorithm::Auto));
  REQUIRE(cache.find(Collective::AllReduce, 1 << 20, Algorithm::Ring));
  CHECK(cache.find(Collective::AllReduce, 1 << 20, Algorithm::Ring)->entry == &second_entry);
  CHECK(cache.find(Collective::AllReduce, 1 << 20, Algorithm::Ring)->entry->hearing == Hearing::Partial);
  REQUIRE(cache.find(Collective::Broadcast, 8, Algorithm::Auto));
  CHECK(cache.find(Collective::Broadcast, 8, Algorithm::Auto)->choice.algorithm == Algorithm::Tree);

  cache.clear();
  CHECK_FALSE(cache.find(Collective::AllReduce, 1 << 20, Algorithm::Ring));
  CHECK_FALSE(cache.find(Collective::Broadcast, 8, Algorithm::Auto));
  CHECK_FALSE(cache.find(Collective::Barrier, 0, Algorithm::Auto));  // a cleared slot is no answer for 0 bytes
}

TEST_CASE("threads storing and finding at once never see half of one answer and half of another") {
  // Every answer stored for size s has chunk s, link chunk 2s and a table row chosen by s's
  // parity: a reader that sees any other combination saw a torn slot.
  ChoiceCache cache;
  std::atomic<bool> stop{false};
  std::atomic<long> hits{0}, torn{0};
  std::vector<std::thread> threads;
  for (int writer = 0; writer < 2; ++writer) {
    threads.emplace_back([&, writer] {
      for (std::size_t round = 0; !stop.load(); ++round) {
        std::size_t size = 1 + (round * 2 + static_cast<std::size_t>(writer)) % 64;
        cache.store(
            Collective::AllReduce, size, Algorithm::Auto,
            answer(size % 2 ? Algorithm::Ring : Algorithm::Direct, size, size % 2 ? &first_entry : &second_entry));
        // Writers that never let go starve the readers (a slot always mid-write is a miss):
        // on two busy cores a run of 300 ms once saw no hit at all.
        if (round % 4 == 0) std::this_thread::yield();
      }
    });
  }
  for (int reader = 0; reader < 2; ++reader) {
    threads.emplace_back([&] {
      for (std::size_t round = 0; !stop.load(); ++round) {
        std::size_t size = 1 + round % 64;
        auto hit = cache.find(Collective::AllReduce, size, Algorithm::Auto);
        if (!hit) continue;
        ++hits;
        bool odd = size % 2;
        if (hit->choice.chunk_bytes != size || hit->choice.link_chunk_bytes != 2 * size ||
            hit->entry != (odd ? &first_entry : &second_entry) ||
            hit->choice.algorithm != (odd ? Algorithm::Ring : Algorithm::Direct))
          ++torn;
      }
    });
  }
  // Until the readers have checked enough answers (or 10 s, on a machine too busy for them).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  while (hits.load() < 100000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& thread : threads) thread.join();
  CHECK(torn.load() == 0);
  CHECK(hits.load() > 0);
}
