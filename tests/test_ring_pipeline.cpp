// The ring's pipeline when the transport stops reducing on arrival part-way through a call (the
// predecessor finished its part and closed its connection, leaving its last messages behind):
// receives posted to reduce on arrival must not be reduced a second time from scratch. Run over
// an in-memory transport that grants irecv_reduce a given number of times, with poisoned
// scratch, against sums computed here.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cstring>
#include <future>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "algorithms/reduce.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/scratch.hpp"
#include "tests/support/loopback_transport.hpp"

using comm::DType;
using comm::ReduceOp;
using comm::algorithms::CollectiveContext;

namespace {

std::int64_t input_value(int rank, std::size_t index) { return static_cast<std::int64_t>(index) * 7 + rank * 1000 + 3; }

// Runs `call(context, data)` on every rank over one loopback world, each rank's transport granting
// `reducing_receives` reducing receives; returns each rank's buffer afterwards.
template <class Call>
std::vector<std::vector<std::int64_t>> run_ring(int ranks, std::size_t count, int reducing_receives, Call call) {
  comm::testing::LoopbackWorld world(ranks);
  std::vector<std::vector<std::int64_t>> buffers(ranks);
  std::vector<std::future<void>> done;
  for (int rank = 0; rank < ranks; ++rank) {
    done.push_back(std::async(std::launch::async, [&, rank] {
      comm::testing::LoopbackTransport transport(world, rank, reducing_receives);
      comm::algorithms::ScratchPool scratch;
      // What the scratch held before (another call's bytes) must never reach a result.
      for (int slot = 0; slot < comm::algorithms::ScratchPool::kSlots; ++slot) {
        std::memset(scratch.get(slot, 1 << 16), 0x5A, 1 << 16);
      }
      CollectiveContext context{transport, rank, ranks, 1, std::chrono::seconds(20), "test"};
      context.scratch = &scratch;
      auto& data = buffers[rank];
      data.resize(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = input_value(rank, i);
      call(context, data);
    }));
  }
  for (auto& rank : done) rank.get();
  return buffers;
}

std::int64_t sum_over_ranks(int ranks, std::size_t index) {
  std::int64_t sum = 0;
  for (int rank = 0; rank < ranks; ++rank) sum += input_value(rank, index);
  return sum;
}

}  // namespace

TEST_CASE("ring reduce_scatter: a transport that stops reducing on arrival mid-call", "[ring]") {
  int ranks = GENERATE(3, 4, 5, 8);
  int granted = GENERATE(0, 1, 2, 3, 5, 100);
  std::size_t block = GENERATE(std::size_t{1}, std::size_t{37}, std::size_t{5000});
  INFO(ranks << " ranks, " << granted << " reducing receives granted, blocks of " << block);
  auto buffers = run_ring(ranks, block * static_cast<std::size_t>(ranks), granted, [&](auto& context, auto& data) {
    // Chunks of 1 KiB: several per block, so receives are posted ahead within one step too.
    comm::algorithms::ring_reduce_scatter(context, data.data(), block, DType::Int64, ReduceOp::Sum, 1024);
  });
  for (int rank = 0; rank < ranks; ++rank) {
    for (std::size_t i = 0; i < block; ++i) {
      std::size_t index = static_cast<std::size_t>(rank) * block + i;
      INFO("rank " << rank << ", element " << index);
      REQUIRE(buffers[rank][index] == sum_over_ranks(ranks, index));
    }
  }
}

TEST_CASE("ring all_reduce: a transport that stops reducing on arrival mid-call", "[ring]") {
  int ranks = GENERATE(3, 4, 7);
  int granted = GENERATE(0, 1, 2, 4, 100);
  std::size_t count = GENERATE(std::size_t{5}, std::size_t{3001});
  INFO(ranks << " ranks, " << granted << " reducing receives granted, " << count << " elements");
  auto buffers = run_ring(ranks, count, granted, [&](auto& context, auto& data) {
    comm::algorithms::ring_all_reduce(context, data.data(), data.size(), DType::Int64, ReduceOp::Sum, 1024);
  });
  for (int rank = 0; rank < ranks; ++rank) {
    for (std::size_t i = 0; i < count; ++i) {
      INFO("rank " << rank << ", element " << i);
      REQUIRE(buffers[rank][i] == sum_over_ranks(ranks, i));
    }
  }
}
