// broadcast, reduce, gather, scatter, all_gather, reduce_scatter, all_to_all and barrier: every
// algorithm each has, world sizes 1..8, several roots, in-place and out-of-place forms, against
// references computed in the test from every rank's (deterministic) input.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <atomic>
#include <cstring>
#include <thread>

#include "algorithms/reduce.hpp"
#include "tests/support/reduce_reference.hpp"
#include "tests/support/thread_ranks.hpp"

using comm::Buffer;
using comm::testing::RankChecks;
using comm::testing::run_ranks;
using namespace comm::testing;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Data types whose sizes cover 1, 2, 4 and 8 bytes, for collectives that only move data.
constexpr DType kMovedTypes[] = {DType::Int8, DType::BFloat16, DType::Float32, DType::UInt64};
const std::vector<std::size_t> kCounts{0, 1, 7, 1003};

std::vector<int> roots_for(int ranks) {
  std::vector<int> roots{0};
  if (ranks > 1) roots.push_back(ranks - 1);
  if (ranks > 2) roots.push_back(ranks / 2);
  return roots;
}

std::string describe(const char* what, DType dtype, std::size_t count, int rank, int root = -1) {
  return std::string(what) + " " + comm::to_string(dtype) + " count " + std::to_string(count) + " on rank " +
         std::to_string(rank) + (root >= 0 ? " root " + std::to_string(root) : "");
}

// One copy of `from` elements [first, first + count) (elements of dtype).
Bytes slice(const Bytes& from, DType dtype, std::size_t first, std::size_t count) {
  std::size_t size = comm::element_size(dtype);
  return Bytes(from.begin() + static_cast<std::ptrdiff_t>(first * size),
               from.begin() + static_cast<std::ptrdiff_t>((first + count) * size));
}

Bytes concatenated(const std::vector<Bytes>& parts) {
  Bytes all;
  for (const Bytes& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace

TEST_CASE("broadcast and reduce: every algorithm, root and world size", "[collectives][rooted]") {
  int ranks = GENERATE(1, 2, 3, 4, 5, 7, 8);
  std::string transport = GENERATE("shm", "tcp");
  INFO(ranks << " ranks over " << transport);
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int rank = group.rank();
        for (std::string_view algorithm : {"ring", "tree"}) {
          for (int root : roots_for(ranks)) {
            for (DType dtype : kMovedTypes) {
              for (std::size_t count : kCounts) {
                Bytes data = rank_input(rank, dtype, count, static_cast<unsigned>(root));
                group.broadcast(Buffer(data.data(), count, dtype), root, algorithm);
                checks.check(data == rank_input(root, dtype, count, static_cast<unsigned>(root)),
                             "broadcast delivers root's bytes", __LINE__,
                             std::string(algorithm) + " " + describe("broadcast", dtype, count, rank, root));
              }
            }
            for (DType dtype : kAllTypes) {
              for (ReduceOp op : kAllOps) {
                if (!comm::algorithms::supports(dtype, op)) continue;
                for (std::size_t count : kCounts) {
                  auto inputs = all_inputs(ranks, dtype, count, 100u + static_cast<unsigned>(op));
                  Bytes data = inputs[static_cast<std::size_t>(rank)];
                  group.reduce(Buffer(data.data(), count, dtype), root, op, algorithm);
                  std::string what = std::string(algorithm) + " " + comm::to_string(op) + " " +
                                     describe("reduce", dtype, count, rank, root);
                  if (rank == root) {
                    checks.check(count_wrong(data, inputs, dtype, op, count) == 0, "reduce result on root", __LINE__,
                                 what);
                  } else {
                    checks.check(data == inputs[static_cast<std::size_t>(rank)], "reduce leaves non-root input",
                                 __LINE__, what);
                  }
                }
              }
            }
          }
        }
      },
      std::chrono::seconds(120), transport);
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("gather and scatter: every root and world size", "[collectives][rooted]") {
  int ranks = GENERATE(1, 2, 3, 4, 5, 7, 8);
  INFO(ranks << " ranks over shm");
  RankChecks checks;
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    int rank = group.rank();
    for (int root : roots_for(ranks)) {
      for (DType dtype : kMovedTypes) {
        for (std::size_t count : kCounts) {
          // gather: root's outputs[r] == rank r's input
          Bytes input = rank_input(rank, dtype, count, 7);
          std::vector<Bytes> outputs(static_cast<std::size_t>(ranks), Bytes(count * comm::element_size(dtype), 0xEE));
          std::vector<Buffer> views;
          for (Bytes& output : outputs) views.emplace_back(output.data(), count, dtype);
          group.gather(Buffer(input.data(), count, dtype), views, root);
          if (rank == root) {
            for (int r = 0; r < ranks; ++r) {
              checks.check(outputs[static_cast<std::size_t>(r)] == rank_input(r, dtype, count, 7), "gathered block",
                           __LINE__, describe("gather", dtype, count, rank, root) + " block " + std::to_string(r));
            }
          }
          // scatter: rank r receives root's inputs[r]
          std::vector<Bytes> blocks;
          for (int r = 0; r < ranks; ++r) blocks.push_back(rank_input(root * 100 + r, dtype, count, 8));
          std::vector<Buffer> block_views;
          for (Bytes& block : blocks) block_views.emplace_back(block.data(), count, dtype);
          Bytes received(count * comm::element_size(dtype), 0xEE);
          group.scatter(Buffer(received.data(), count, dtype), block_views, root);
          checks.check(received == rank_input(root * 100 + rank, dtype, count, 8), "scattered block", __LINE__,
                       describe("scatter", dtype, count, rank, root));
        }
      }
    }
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("all_gather, reduce_scatter and all_to_all: in place and out of place", "[collectives]") {
  int ranks = GENERATE(1, 2, 3, 4, 5, 7, 8);
  std::string transport = GENERATE("shm", "tcp");
  INFO(ranks << " ranks over " << transport);
  auto n = static_cast<std::size_t>(ranks);
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        int rank = group.rank();
        auto me = static_cast<std::size_t>(rank);
        for (bool in_place : {false, true}) {
          std::string form = in_place ? " in place" : " out of place";
          for (DType dtype : kMovedTypes) {
            std::size_t size = comm::element_size(dtype);
            for (std::size_t count : kCounts) {
              std::vector<Bytes> everyone;
              for (int r = 0; r < ranks; ++r) everyone.push_back(rank_input(r, dtype, count, 9));
              Bytes expected = concatenated(everyone);
              // all_gather into one flat buffer
              Bytes flat(n * count * size, 0xEE);
              Bytes input = everyone[me];
              void* input_at = input.data();
              if (in_place) {
                if (count > 0) std::memcpy(flat.data() + me * count * size, input.data(), count * size);
                input_at = flat.data() + me * count * size;
              }
              group.all_gather(Buffer(flat.data(), n * count, dtype), Buffer(input_at, count, dtype));
              checks.check(flat == expected, "all_gather (flat)", __LINE__,
                           describe("all_gather", dtype, count, rank) + form);
              // all_gather into a list (out of place only)
              if (!in_place) {
                std::vector<Bytes> outputs(n, Bytes(count * size, 0xEE));
                std::vector<Buffer> views;
                for (Bytes& output : outputs) views.emplace_back(output.data(), count, dtype);
                group.all_gather(views, Buffer(input.data(), count, dtype));
                checks.check(outputs == everyone, "all_gather (list)", __LINE__,
                             describe("all_gather list", dtype, count, rank));
              }
              // all_to_all: block r of rank s's input lands in block s of rank r's output
              Bytes send = rank_input(rank, dtype, n * count, 10);
              Bytes want;
              for (int s = 0; s < ranks; ++s) {
                Bytes theirs = rank_input(s, dtype, n * count, 10);
                Bytes block = slice(theirs, dtype, me * count, count);
                want.insert(want.end(), block.begin(), block.end());
              }
              Bytes receive(n * count * size, 0xEE);
              Bytes& out = in_place ? send : receive;
              group.all_to_all(Buffer(out.data(), n * count, dtype), Buffer(send.data(), n * count, dtype));
              checks.check(out == want, "all_to_all", __LINE__, describe("all_to_all", dtype, count, rank) + form);
            }
          }
          for (DType dtype : kAllTypes) {
            for (ReduceOp op : kAllOps) {
              if (!comm::algorithms::supports(dtype, op)) continue;
              for (std::size_t count : kCounts) {
                auto inputs = all_inputs(ranks, dtype, n * count, 200u + static_cast<unsigned>(op));
                std::vector<Bytes> my_blocks;
                for (const Bytes& input : inputs) my_blocks.push_back(slice(input, dtype, me * count, count));
                Bytes data = inputs[me];
                Bytes output(count * comm::element_size(dtype), 0xEE);
                void* output_at = in_place ? data.data() + me * count * comm::element_size(dtype) : output.data();
                group.reduce_scatter(Buffer(output_at, count, dtype), Buffer(data.data(), n * count, dtype), op);
                Bytes result(static_cast<std::uint8_t*>(output_at),
                             static_cast<std::uint8_t*>(output_at) + count * comm::element_size(dtype));
                std::string wrong = describe_wrong(result, my_blocks, dtype, op, count);
                checks.check(wrong.empty(), "reduce_scatter block", __LINE__,
                             std::string(comm::to_string(op)) + " " + describe("reduce_scatter", dtype, count, rank) +
                                 form + ": " + wrong);
                if (!in_place) checks.check(data == inputs[me], "reduce_scatter keeps its input", __LINE__);
              }
            }
          }
        }
      },
      std::chrono::seconds(120), transport);
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("barrier: no rank leaves before every rank arrived", "[collectives][barrier]") {
  int ranks = GENERATE(1, 2, 3, 5, 8);
  // shm: the shared-memory barrier; tcp: dissemination.
  std::string transport = GENERATE("shm", "tcp");
  INFO(ranks << " ranks over " << transport);
  std::atomic<int> arrived{0};
  RankChecks checks;
  run_ranks(
      ranks,
      [&](comm::ProcessGroup& group) {
        for (int round = 1; round <= 20; ++round) {
          if (group.rank() == round % ranks) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a latecomer
          arrived.fetch_add(1);
          group.barrier();
          checks.check(arrived.load() >= round * ranks, "all arrived before anyone left", __LINE__,
                       "round " + std::to_string(round) + " rank " + std::to_string(group.rank()));
          group.barrier();  // nobody starts the next round's count before everyone checked
        }
      },
      std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("large collectives pipeline through many chunks", "[collectives][large]") {
  int ranks = GENERATE(3, 5);
  auto n = static_cast<std::size_t>(ranks);
  std::size_t count = std::size_t{4} << 20;  // 16 MiB of float32
  RankChecks checks;
  auto inputs = all_inputs(ranks, DType::Float32, count, 11);
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    auto me = static_cast<std::size_t>(group.rank());
    Bytes data = inputs[me];
    group.broadcast(Buffer(data.data(), count, DType::Float32), 1, "ring");
    checks.check(data == inputs[1], "ring broadcast of 16 MiB", __LINE__);
    data = inputs[me];
    group.reduce(Buffer(data.data(), count, DType::Float32), 2, ReduceOp::Sum, "ring");
    if (me == 2)
      checks.check(count_wrong(data, inputs, DType::Float32, ReduceOp::Sum, count) == 0, "ring reduce of 16 MiB",
                   __LINE__);
    Bytes gathered(n * count * 4);
    group.all_gather(Buffer(gathered.data(), n * count, DType::Float32),
                     Buffer(inputs[me].data(), count, DType::Float32));
    checks.check(gathered == concatenated(inputs), "all_gather of 16 MiB per rank", __LINE__);
  });
  REQUIRE_RANK_CHECKS(checks);
}

TEST_CASE("1000003 elements through every algorithm of every collective", "[collectives][large]") {
  int ranks = GENERATE(2, 3, 5);
  auto n = static_cast<std::size_t>(ranks);
  const std::size_t count = 1000003;
  RankChecks checks;
  auto inputs = all_inputs(ranks, DType::Float64, count, 12);
  auto blocks = all_inputs(ranks, DType::Int32, count * n, 13);
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    auto me = static_cast<std::size_t>(group.rank());
    int root = ranks - 1;
    for (std::string_view algorithm : {"ring", "tree"}) {
      std::string name(algorithm);
      Bytes data = inputs[me];
      group.broadcast(Buffer(data.data(), count, DType::Float64), root, algorithm);
      checks.check(data == inputs[static_cast<std::size_t>(root)], "broadcast", __LINE__, name);
      data = inputs[me];
      group.reduce(Buffer(data.data(), count, DType::Float64), root, ReduceOp::Max, algorithm);
      if (group.rank() == root) {
        checks.check(count_wrong(data, inputs, DType::Float64, ReduceOp::Max, count) == 0, "reduce", __LINE__, name);
      }
    }
    // reduce_scatter of 1000003 int32 per rank, then all_gather and all_to_all of the same sizes
    Bytes data = blocks[me];
    Bytes mine(count * 4);
    group.reduce_scatter(Buffer(mine.data(), count, DType::Int32), Buffer(data.data(), count * n, DType::Int32),
                         ReduceOp::Sum);
    std::vector<Bytes> my_blocks;
    for (const Bytes& input : blocks) my_blocks.push_back(slice(input, DType::Int32, me * count, count));
    checks.check(count_wrong(mine, my_blocks, DType::Int32, ReduceOp::Sum, count) == 0, "reduce_scatter", __LINE__);
    Bytes gathered(count * n * 4);
    group.all_gather(Buffer(gathered.data(), count * n, DType::Int32), Buffer(blocks[me].data(), count, DType::Int32));
    std::vector<Bytes> firsts;
    for (const Bytes& input : blocks) firsts.push_back(slice(input, DType::Int32, 0, count));
    checks.check(gathered == concatenated(firsts), "all_gather", __LINE__);
    Bytes exchanged(count * n * 4);
    group.all_to_all(Buffer(exchanged.data(), count * n, DType::Int32),
                     Buffer(blocks[me].data(), count * n, DType::Int32));
    std::vector<Bytes> received;
    for (const Bytes& input : blocks) received.push_back(slice(input, DType::Int32, me * count, count));
    checks.check(exchanged == concatenated(received), "all_to_all", __LINE__);
  });
  REQUIRE_RANK_CHECKS(checks);
}
