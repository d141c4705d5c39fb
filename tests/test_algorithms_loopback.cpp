// Every algorithm of every collective in the algorithm table, run alone on the in-process
// loopback medium (tests/support/loopback_transport.hpp) for 1-9 ranks and awkward counts, its
// results checked against references computed here. The multi-process tests run the same
// algorithms over TCP and shared memory; these find a wrong rank arithmetic in seconds, with the
// algorithm named. The same scenarios run over the real message protocol (MeshTransport) on a
// second, in-memory medium (transport/memory/memory_stream.hpp): what a new medium must provide.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/generators/catch_generators_range.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/scratch.hpp"
#include "comm/store.hpp"
#include "libcomm/base/collective_traits.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "tests/support/loopback_transport.hpp"
#include "transport/memory/memory_stream.hpp"
#include "transport/message/mesh_transport.hpp"
#include "transport/shm/shared_arena.hpp"

using comm::Algorithm;
using comm::Collective;
using comm::DType;
using comm::ReduceOp;
using comm::algorithms::AlgorithmEntry;
using comm::algorithms::CollectiveContext;
using comm::algorithms::HostCall;
using comm::algorithms::Requirement;
using comm::algorithms::Resources;

namespace {

// Chunks far below the real ones, so that a few hundred elements already take several.
constexpr std::size_t kChunkBytes = 1024;
// Arena slots just over the size (16 KiB) from which a piece is reduced by segment, one per rank.
constexpr std::size_t kArenaSlotBytes = 24 * 1024;

// Rank r's element i: distinct per rank and element, small enough that int64 sums are exact.
std::int64_t input_value(int rank, std::size_t index) {
  return static_cast<std::int64_t>((index * 7919 + static_cast<std::size_t>(rank) * 104729) % 100003) - 50000;
}

std::int64_t reduce_over_ranks(int ranks, std::size_t index, ReduceOp op) {
  std::int64_t result = input_value(0, index);
  for (int rank = 1; rank < ranks; ++rank) {
    std::int64_t value = input_value(rank, index);
    result = op == ReduceOp::Max ? std::max(result, value) : result + value;
  }
  return result;
}

// One rank's buffers for one call: what the call reads and writes, kept alive across it.
struct RankBuffers {
  std::vector<std::int64_t> output, input;
  std::vector<std::vector<std::int64_t>> blocks;  // gather's outputs or scatter's inputs
};

struct Scenario {
  const AlgorithmEntry* entry;
  int ranks;
  std::size_t count;  // HostCall::count
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  bool in_place = false;
  bool separate_outputs = false;  // all_gather into one output per rank
  std::vector<int> hosts{};       // for the hierarchical algorithms
  Algorithm across_hosts = Algorithm::Ring;
};

std::string describe(const Scenario& scenario) {
  return std::string(to_string(scenario.entry->collective)) + " " + to_string(scenario.entry->algorithm) + ", " +
         std::to_string(scenario.ranks) + " ranks, count " + std::to_string(scenario.count) + ", " +
         to_string(scenario.op) + ", root " + std::to_string(scenario.root) + (scenario.in_place ? ", in place" : "") +
         (scenario.separate_outputs ? ", one output per rank" : "") +
         (scenario.hosts.empty()
              ? ""
              : ", " + std::to_string(*std::max_element(scenario.hosts.begin(), scenario.hosts.end()) + 1) +
                    " hosts, across them " + to_string(scenario.across_hosts));
}

// all_to_all_v's counts in a scenario: uneven, zeros among them (s.count varies them), the same
// on every rank; and where rank `from`'s block for rank `to` starts in its input.
std::size_t uneven_count(const Scenario& s, int from, int to) {
  return (s.count * static_cast<std::size_t>(from + 1) + static_cast<std::size_t>(3 * to)) % 7;
}
std::size_t uneven_offset(const Scenario& s, int from, int to) {
  std::size_t offset = 0;
  for (int t = 0; t < to; ++t) offset += uneven_count(s, from, t);
  return offset;
}
// The blocks of the v-forms whose counts every rank shares: rank r's is uneven_count(s, r, 0)
// elements, at block_offset(s, r).
std::size_t block_offset(const Scenario& s, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += uneven_count(s, r, 0);
  return offset;
}

// Fills rank `rank`'s buffers for the call and returns the call over them.
HostCall prepare(const Scenario& s, int rank, RankBuffers& buffers) {
  auto n = static_cast<std::size_t>(s.ranks);
  auto fill = [&](std::vector<std::int64_t>& data, std::size_t count, std::size_t offset) {
    data.resize(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = input_value(rank, offset + i);
  };
  HostCall call{.collective = s.entry->collective, .dtype = DType::Int64, .op = s.op, .root = s.root, .count = s.count};
  switch (s.entry->collective) {
    case Collective::Broadcast:
    case Collective::AllReduce:
    case Collective::Reduce:
      fill(buffers.output, s.count, 0);
      call.output = buffers.output.data();
      break;
    case Collective::AllGather:
      fill(buffers.input, s.count, 0);
      if (s.separate_outputs) {
        buffers.blocks.assign(n, std::vector<std::int64_t>(s.count, -1));
        for (auto& block : buffers.blocks) call.output_blocks.push_back(block.data());
      } else {
        buffers.output.assign(n * s.count, -1);
        call.output = buffers.output.data();
        if (s.in_place) {
          std::copy(buffers.input.begin(), buffers.input.end(), buffers.output.begin() + rank * s.count);
          call.input = buffers.output.data() + rank * s.count;
          break;
        }
      }
      call.input = buffers.input.data();
      break;
    case Collective::ReduceScatter:
      fill(buffers.input, n * s.count, 0);
      buffers.output.assign(s.count, -1);
      call.input = buffers.input.data();
      call.output = s.in_place ? buffers.input.data() + rank * s.count : buffers.output.data();
      break;
    case Collective::AllToAll:
      fill(buffers.input, n * s.count, 0);
      buffers.output.assign(n * s.count, -1);
      call.input = buffers.input.data();
      call.output = s.in_place ? buffers.input.data() : buffers.output.data();
      break;
    case Collective::AllGatherV: {
      // Rank r brings uneven_count(s, r, 0) elements; in place: from its block of the output.
      std::size_t total = 0, own = 0;
      for (int r = 0; r < s.ranks; ++r) {
        if (r == rank) own = total;
        call.counts.push_back(uneven_count(s, r, 0));
        total += call.counts.back();
      }
      fill(buffers.input, uneven_count(s, rank, 0), 0);
      buffers.output.assign(total, -1);
      call.count = uneven_count(s, rank, 0);
      call.output = buffers.output.data();
      if (s.in_place) std::copy(buffers.input.begin(), buffers.input.end(), buffers.output.begin() + own);
      call.input = s.in_place ? buffers.output.data() + own : buffers.input.data();
      break;
    }
    case Collective::ReduceScatterV:
    case Collective::GatherV:
    case Collective::ScatterV: {
      // Shared counts; in place: the rank's block of the (root's) output or input.
      std::size_t total = block_offset(s, s.ranks), own = block_offset(s, rank), mine = uneven_count(s, rank, 0);
      for (int r = 0; r < s.ranks; ++r) call.counts.push_back(uneven_count(s, r, 0));
      call.count = mine;
      if (s.entry->collective == Collective::GatherV) {
        fill(buffers.input, mine, 0);
        call.input = buffers.input.data();
        if (rank == s.root) {
          buffers.output.assign(total, -1);
          call.output = buffers.output.data();
          if (s.in_place) std::copy(buffers.input.begin(), buffers.input.end(), buffers.output.begin() + own);
          if (s.in_place) call.input = buffers.output.data() + own;
        }
        break;
      }
      bool holds_all = s.entry->collective == Collective::ReduceScatterV || rank == s.root;
      if (holds_all) fill(buffers.input, total, 0);
      call.input = holds_all ? buffers.input.data() : nullptr;
      buffers.output.assign(mine, -1);
      call.output = s.in_place && holds_all ? buffers.input.data() + own : buffers.output.data();
      break;
    }
    case Collective::AllToAllV: {
      std::size_t sent = uneven_offset(s, rank, s.ranks), received = 0;
      for (int r = 0; r < s.ranks; ++r) call.counts.push_back(uneven_count(s, rank, r));
      for (int r = 0; r < s.ranks; ++r) {
        call.counts.push_back(uneven_count(s, r, rank));
        received += call.counts.back();
      }
      fill(buffers.input, s.in_place ? std::max(sent, received) : sent, 0);
      buffers.output.assign(received, -1);
      call.count = sent;
      call.input = buffers.input.data();
      call.output = s.in_place ? buffers.input.data() : buffers.output.data();
      break;
    }
    case Collective::Gather:
      fill(buffers.input, s.count, 0);
      call.input = buffers.input.data();
      if (rank == s.root) {
        buffers.blocks.assign(n, std::vector<std::int64_t>(s.count, -1));
        for (auto& block : buffers.blocks) call.output_blocks.push_back(block.data());
      }
      break;
    case Collective::Scatter:
      buffers.output.assign(s.count, -1);
      call.output = buffers.output.data();
      if (rank == s.root) {
        buffers.blocks.resize(n);
        for (std::size_t r = 0; r < n; ++r) fill(buffers.blocks[r], s.count, r * s.count);
        for (auto& block : buffers.blocks) call.input_blocks.push_back(block.data());
      }
      break;
    case Collective::Barrier: call.count = 0; break;
  }
  return call;
}

// What rank `rank` must hold afterwards, checked with REQUIREs.
void check(const Scenario& s, int rank, const RankBuffers& buffers) {
  auto n = static_cast<std::size_t>(s.ranks);
  INFO(describe(s) << "; rank " << rank);
  switch (s.entry->collective) {
    case Collective::Broadcast:
      for (std::size_t i = 0; i < s.count; ++i) REQUIRE(buffers.output[i] == input_value(s.root, i));
      break;
    case Collective::AllReduce:
      for (std::size_t i = 0; i < s.count; ++i) REQUIRE(buffers.output[i] == reduce_over_ranks(s.ranks, i, s.op));
      break;
    case Collective::Reduce:
      for (std::size_t i = 0; i < s.count; ++i) {
        REQUIRE(buffers.output[i] == (rank == s.root ? reduce_over_ranks(s.ranks, i, s.op) : input_value(rank, i)));
      }
      break;
    case Collective::AllGather:
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < s.count; ++i) {
          std::int64_t got = s.separate_outputs ? buffers.blocks[r][i] : buffers.output[r * s.count + i];
          REQUIRE(got == input_value(static_cast<int>(r), i));
        }
      }
      break;
    case Collective::ReduceScatter: {
      std::size_t own = static_cast<std::size_t>(rank) * s.count;
      for (std::size_t i = 0; i < s.count; ++i) {
        std::int64_t got = s.in_place ? buffers.input[own + i] : buffers.output[i];
        REQUIRE(got == reduce_over_ranks(s.ranks, own + i, s.op));
      }
      if (!s.in_place) {  // an out-of-place call leaves its input as it was
        for (std::size_t i = 0; i < n * s.count; ++i) REQUIRE(buffers.input[i] == input_value(rank, i));
      }
      break;
    }
    case Collective::AllToAll: {
      const auto& result = s.in_place ? buffers.input : buffers.output;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < s.count; ++i) {
          REQUIRE(result[r * s.count + i] ==
                  input_value(static_cast<int>(r), static_cast<std::size_t>(rank) * s.count + i));
        }
      }
      break;
    }
    case Collective::AllGatherV: {
      std::size_t at = 0;
      for (int from = 0; from < s.ranks; ++from) {
        for (std::size_t i = 0; i < uneven_count(s, from, 0); ++i) REQUIRE(buffers.output[at + i] == input_value(from, i));
        at += uneven_count(s, from, 0);
      }
      break;
    }
    case Collective::ReduceScatterV:
    case Collective::ScatterV: {
      std::size_t own = block_offset(s, rank);
      bool in_input = s.in_place && (s.entry->collective == Collective::ReduceScatterV || rank == s.root);
      for (std::size_t i = 0; i < uneven_count(s, rank, 0); ++i) {
        std::int64_t got = in_input ? buffers.input[own + i] : buffers.output[i];
        REQUIRE(got == (s.entry->collective == Collective::ScatterV ? input_value(s.root, own + i)
                                                                     : reduce_over_ranks(s.ranks, own + i, s.op)));
      }
      break;
    }
    case Collective::GatherV:
      for (int from = 0; rank == s.root && from < s.ranks; ++from) {
        for (std::size_t i = 0; i < uneven_count(s, from, 0); ++i) {
          REQUIRE(buffers.output[block_offset(s, from) + i] == input_value(from, i));
        }
      }
      break;
    case Collective::AllToAllV: {
      const auto& result = s.in_place ? buffers.input : buffers.output;
      std::size_t at = 0;
      for (int from = 0; from < s.ranks; ++from) {
        std::size_t offset = uneven_offset(s, from, rank);
        for (std::size_t i = 0; i < uneven_count(s, from, rank); ++i) {
          REQUIRE(result[at + i] == input_value(from, offset + i));
        }
        at += uneven_count(s, from, rank);
      }
      break;
    }
    case Collective::Gather:
      if (rank != s.root) break;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < s.count; ++i) REQUIRE(buffers.blocks[r][i] == input_value(static_cast<int>(r), i));
      }
      break;
    case Collective::Scatter:
      for (std::size_t i = 0; i < s.count; ++i) {
        REQUIRE(buffers.output[i] == input_value(s.root, static_cast<std::size_t>(rank) * s.count + i));
      }
      break;
    case Collective::Barrier: break;
  }
}

// What the ranks' messages travel over: the loopback transport, or MeshTransport (the message
// protocol of the real media) over in-memory byte streams.
enum class Medium { Loopback, MemoryStreams };

// The transport of one rank over `medium`.
std::shared_ptr<comm::transport::Transport> transport_of(
    Medium medium, comm::testing::LoopbackWorld& world,
    std::vector<std::unique_ptr<comm::transport::ByteStream>>& streams, const std::vector<int>& hosts, int rank) {
  if (medium == Medium::Loopback) {
    // Even ranks reduce messages as they arrive, odd ones receive into scratch and reduce after:
    // both paths of every reducing algorithm run in every call.
    return std::make_shared<comm::testing::LoopbackTransport>(world, rank, rank % 2 == 0 ? -1 : 0);
  }
  int ranks = static_cast<int>(streams.size());
  std::vector<std::string> names;
  for (int r = 0; r < ranks; ++r) names.push_back("rank " + std::to_string(r));
  std::vector<int> numbered = hosts.empty() ? std::vector<int>(static_cast<std::size_t>(ranks), 0) : hosts;
  return comm::transport::MeshTransport::create(rank, std::move(names), std::move(streams), std::move(numbered),
                                                nullptr, comm::transport::create_shared_arena);
}

// Runs the scenario on every rank, each a thread over one LoopbackWorld, then checks every rank.
void run(const Scenario& s, Medium medium = Medium::Loopback) {
  comm::testing::LoopbackWorld world(s.ranks, s.hosts);
  auto streams =
      medium == Medium::MemoryStreams
          ? comm::transport::memory_stream_mesh(s.ranks)
          : std::vector<std::vector<std::unique_ptr<comm::transport::ByteStream>>>(static_cast<std::size_t>(s.ranks));
  std::atomic<int> finished{0};
  comm::HashStore store;
  std::vector<RankBuffers> buffers(static_cast<std::size_t>(s.ranks));
  std::atomic<int> arrived{0}, left_early{0};
  std::uint64_t fingerprint = comm::detail::fingerprint({.collective = static_cast<int>(s.entry->collective),
                                                         .dtype = static_cast<int>(DType::Int64),
                                                         .algorithm = s.entry->algorithm,
                                                         .count = s.count});
  std::vector<std::future<void>> ranks;
  for (int rank = 0; rank < s.ranks; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      auto owned = transport_of(medium, world, streams[static_cast<std::size_t>(rank)], s.hosts, rank);
      comm::transport::Transport& transport = *owned;
      comm::algorithms::ScratchPool scratch;
      // What the scratch held before (another call's bytes) must never reach a result.
      for (int slot = 0; slot < comm::algorithms::ScratchPool::kSlots; ++slot) {
        std::memset(scratch.get(slot, 1 << 16), 0x5A, 1 << 16);
      }
      std::unique_ptr<comm::transport::SharedArena> arena;
      if (s.entry->requirement == Requirement::SharedMemory) {
        arena = transport.map_shared_arena(store, "arena", rank, s.ranks, std::chrono::seconds(20), kArenaSlotBytes);
      }
      comm::algorithms::HostLayout hosts;
      if (!s.hosts.empty()) hosts = comm::algorithms::HostLayout(transport.hosts(), {}, rank, s.ranks);
      Resources resources{{s.entry->algorithm, kChunkBytes, kChunkBytes, s.across_hosts}, &hosts, arena.get()};
      HostCall call = prepare(s, rank, buffers[static_cast<std::size_t>(rank)]);
      CollectiveContext context{transport, rank, s.ranks, 1, std::chrono::seconds(20), to_string(s.entry->collective)};
      context.scratch = &scratch;
      context.fingerprint = fingerprint;
      ++arrived;
      s.entry->run(context, call, resources);
      if (arrived.load() != s.ranks) ++left_early;
      // Nobody leaves (a MeshTransport says goodbye) while a peer may still be reading.
      ++finished;
      while (finished.load() != s.ranks) std::this_thread::yield();
    }));
  }
  for (auto& rank : ranks) rank.get();
  INFO(describe(s));
  if (s.entry->collective == Collective::Barrier) REQUIRE(left_early.load() == 0);
  for (int rank = 0; rank < s.ranks; ++rank) check(s, rank, buffers[static_cast<std::size_t>(rank)]);
  REQUIRE(world.unreceived() == 0);
}

// Host layouts the hierarchy can run on (several hosts, the same number > 1 of ranks on each):
// ranks in blocks by host, and dealt round the hosts.
std::vector<std::vector<int>> hierarchies(int ranks) {
  std::vector<std::vector<int>> layouts;
  for (int hosts = 2; hosts <= ranks / 2; ++hosts) {
    if (ranks % hosts != 0) continue;
    int local = ranks / hosts;
    std::vector<int> blocked(static_cast<std::size_t>(ranks)), dealt(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      blocked[static_cast<std::size_t>(r)] = r / local;
      dealt[static_cast<std::size_t>(r)] = r % hosts;
    }
    layouts.push_back(blocked);
    layouts.push_back(dealt);
  }
  return layouts;
}

bool rooted(Collective collective) { return comm::traits_of(collective).rooted; }
bool reduces(Collective collective) { return comm::traits_of(collective).reduces; }

// Every scenario of one table entry at `ranks` ranks.
void run_entry(const AlgorithmEntry& entry, int ranks, Medium medium = Medium::Loopback) {
  std::vector<std::vector<int>> layouts{{}};
  if (entry.requirement == Requirement::Hierarchy) layouts = hierarchies(ranks);
  std::vector<int> roots{0};
  if (rooted(entry.collective) && ranks > 1) roots = {0, ranks - 1, ranks / 2};
  std::vector<ReduceOp> ops{ReduceOp::Sum};
  if (reduces(entry.collective)) ops.push_back(ReduceOp::Max);
  bool has_in_place = comm::traits_of(entry.collective).in_place;
  for (const auto& hosts : layouts) {
    std::vector<Algorithm> across{Algorithm::Ring};
    if (!hosts.empty() && entry.collective == Collective::AllReduce) across.push_back(Algorithm::HalvingDoubling);
    // 0 and 1 element, a count no rank count divides, and one of several chunks; through an arena
    // also several slots, whole ones reduced by segment and a last part reduced whole.
    std::vector<std::size_t> counts{0, 1, 13, 1237};
    if (entry.requirement == Requirement::SharedMemory)
      counts.push_back(2 * kArenaSlotBytes / sizeof(std::int64_t) + 857);
    for (std::size_t count : counts) {
      for (int root : roots) {
        for (ReduceOp op : ops) {
          for (Algorithm between : across) {
            for (int variant = 0; variant < (has_in_place ? 2 : 1); ++variant) {
              run({&entry, ranks, count, op, root, variant == 1, false, hosts, between}, medium);
            }
            if (entry.collective == Collective::AllGather && entry.algorithm == Algorithm::Ring) {
              run({&entry, ranks, count, op, root, false, true, hosts, between}, medium);
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("every algorithm of every collective on the loopback medium, 1 to 9 ranks", "[loopback]") {
  auto table = comm::algorithms::algorithm_table();
  // One run per row of the table, however many it has: a new row is exercised without an edit here.
  auto index = static_cast<std::size_t>(GENERATE_COPY(Catch::Generators::range(0, static_cast<int>(table.size()))));
  const AlgorithmEntry& entry = table[index];
  for (int ranks = 1; ranks <= 9; ++ranks) {
    // The hierarchy needs several hosts with several ranks each: 4, 6, 8 and 9 ranks.
    if (entry.requirement == Requirement::Hierarchy && hierarchies(ranks).empty()) continue;
    DYNAMIC_SECTION(to_string(entry.collective) << " " << to_string(entry.algorithm) << " on " << ranks << " ranks") {
      run_entry(entry, ranks);
    }
  }
}

TEST_CASE("every algorithm of every collective over the message protocol on a second medium, 1 to 6 ranks",
          "[medium]") {
  auto table = comm::algorithms::algorithm_table();
  auto index = static_cast<std::size_t>(GENERATE_COPY(Catch::Generators::range(0, static_cast<int>(table.size()))));
  const AlgorithmEntry& entry = table[index];
  for (int ranks = 1; ranks <= 6; ++ranks) {
    if (entry.requirement == Requirement::Hierarchy && hierarchies(ranks).empty()) continue;
    DYNAMIC_SECTION(to_string(entry.collective) << " " << to_string(entry.algorithm) << " on " << ranks << " ranks") {
      run_entry(entry, ranks, Medium::MemoryStreams);
    }
  }
}

TEST_CASE("the table holds every collective's algorithms once", "[loopback]") {
  auto table = comm::algorithms::algorithm_table();
  for (int value = 0; value <= static_cast<int>(Collective::Barrier); ++value) {  // every collective
    auto collective = static_cast<Collective>(value);
    INFO(to_string(collective));
    REQUIRE(std::any_of(table.begin(), table.end(), [&](const auto& entry) { return entry.collective == collective; }));
    // The algorithm its row (collective_traits.hpp) has the tuner run is one of its own.
    Algorithm fixed = comm::traits_of(collective).default_algorithm;
    REQUIRE((fixed == Algorithm::Auto || std::any_of(table.begin(), table.end(), [&](const auto& entry) {
               return entry.collective == collective && entry.algorithm == fixed;
             })));
  }
  for (std::size_t a = 0; a < table.size(); ++a) {
    for (std::size_t b = a + 1; b < table.size(); ++b) {
      REQUIRE_FALSE((table[a].collective == table[b].collective && table[a].algorithm == table[b].algorithm));
    }
  }
}
