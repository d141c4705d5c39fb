#include "algorithms/halving_doubling.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "algorithms/chunking.hpp"
#include "algorithms/reduce.hpp"

namespace comm::algorithms {
namespace {

// Chunks of one halving at most (the receives in flight; no call allocates them).
constexpr std::size_t kMostChunks = 256;

}  // namespace

void halving_doubling_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                                 ReduceOp op, std::size_t chunk_bytes) {
  int n = context.size;
  if (n == 1 || count == 0) {
    if (op == ReduceOp::Avg && n > 1) divide(data, count, dtype, static_cast<std::size_t>(n));
    return;
  }
  std::size_t element = element_size(dtype);
  auto* mine = static_cast<std::uint8_t*>(data);
  int power = 1;
  while (power * 2 <= n) power *= 2;
  int rank = context.rank;
  ReduceOp summing = op == ReduceOp::Avg ? ReduceOp::Sum : op;  // an average divides once, at the end
  // Fold: rank power + i gives its data to rank i, and later takes the result from it.
  if (rank >= power) {
    context.send_wait(rank - power, mine, count * element, 0);
    context.recv_wait(rank - power, mine, count * element, 1);
    return;
  }
  std::uint8_t* incoming = context.scratch->get(0, ((count + 1) / 2) * element);
  if (rank + power < n) {
    std::uint8_t* whole = context.scratch->get(1, count * element);
    context.recv_wait(rank + power, whole, count * element, 0);
    reduce(mine, whole, count, dtype, summing);  // the lower rank's data first
  }
  // Reduce-scatter by halving: at each distance, the lower of a pair keeps the lower half of the
  // region both hold and sends the upper half; the region shrinks to this rank's block.
  struct Region {
    std::size_t begin, end;
  };
  // The region before each halving, for the all-gather to undo it: one per bit of the rank, so no
  // call allocates.
  std::array<Region, 32> regions{};
  std::size_t halvings = 0;
  Region region{0, count};
  // Each halving goes in chunks of about chunk_bytes, and each chunk is reduced as soon as it is
  // in while the next ones travel: only the last chunk's reduction is not hidden behind the link.
  // Partners hold the same region, so they cut it alike; each chunk has a tag step of its own.
  int bits = std::bit_width(static_cast<unsigned>(power)) - 1;
  std::size_t most_chunks =
      chunks_for((count + 1) / 2 * element, chunk_bytes, static_cast<std::size_t>(2 * bits), context.step_space - 2);
  std::array<Transfer, kMostChunks> receives{};
  most_chunks = std::min(most_chunks, receives.size());
  // Each halving numbers its chunks from a block of most_chunks steps of its own: ranks whose
  // regions differ by an element may cut them into different numbers of chunks, and a counter
  // running on from chunk to chunk left partners of a later step at different steps (a hang).
  std::uint64_t block = 2;
  for (int distance = 1; distance < power; distance <<= 1, block += most_chunks) {
    std::uint64_t step = block;
    int partner = rank ^ distance;
    std::size_t middle = region.begin + (region.end - region.begin) / 2;
    bool lower = (rank & distance) == 0;
    Region keep = lower ? Region{region.begin, middle} : Region{middle, region.end};
    Region give = lower ? Region{middle, region.end} : Region{region.begin, middle};
    std::size_t keep_count = keep.end - keep.begin, give_count = give.end - give.begin;
    std::size_t chunks = std::min(most_chunks, chunks_for(std::max(keep_count, give_count) * element, chunk_bytes, 1));
    Chunking keep_cut{keep_count, chunks}, give_cut{give_count, chunks};
    TransferSet sends;
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
      receives[chunk] = context.recv(partner, incoming + keep_cut.begin(chunk) * element,
                                     keep_cut.length(chunk) * element, step + chunk);
      sends.add(context.send(partner, mine + (give.begin + give_cut.begin(chunk)) * element,
                             give_cut.length(chunk) * element, step + chunk),
                partner, step + chunk);
    }
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
      context.wait(receives[chunk], partner, step + chunk);
      std::uint8_t* kept = mine + (keep.begin + keep_cut.begin(chunk)) * element;
      const std::uint8_t* arrived = incoming + keep_cut.begin(chunk) * element;
      if (rank < partner) {  // the lower rank's data first, on both sides
        reduce(kept, arrived, keep_cut.length(chunk), dtype, summing);
      } else {
        combine(kept, arrived, kept, keep_cut.length(chunk), dtype, summing);
      }
    }
    sends.wait_all(context);
    regions[halvings++] = region;
    region = keep;
  }
  if (op == ReduceOp::Avg) {
    divide(mine + region.begin * element, region.end - region.begin, dtype, static_cast<std::size_t>(n));
  }
  // All-gather by doubling, the halvings undone in reverse: each pair swaps the halves it owns.
  std::uint64_t step = block;
  for (int distance = power >> 1; distance >= 1; distance >>= 1, ++step) {
    int partner = rank ^ distance;
    Region whole = regions[--halvings];
    Region other = region.begin == whole.begin ? Region{region.end, whole.end} : Region{whole.begin, region.begin};
    context.exchange(partner, mine + region.begin * element, (region.end - region.begin) * element, partner,
                     mine + other.begin * element, (other.end - other.begin) * element, step);
    region = whole;
  }
  if (rank + power < n) context.send_wait(rank + power, mine, count * element, 1);
}

}  // namespace comm::algorithms
