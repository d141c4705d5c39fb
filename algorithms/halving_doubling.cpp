#include "algorithms/halving_doubling.hpp"

#include <array>
#include <cstdint>

#include "algorithms/reduce.hpp"

namespace comm::algorithms {

void halving_doubling_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                                 ReduceOp op) {
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
  std::uint64_t step = 2;
  for (int distance = 1; distance < power; distance <<= 1, ++step) {
    int partner = rank ^ distance;
    std::size_t middle = region.begin + (region.end - region.begin) / 2;
    bool lower = (rank & distance) == 0;
    Region keep = lower ? Region{region.begin, middle} : Region{middle, region.end};
    Region give = lower ? Region{middle, region.end} : Region{region.begin, middle};
    std::size_t keep_count = keep.end - keep.begin;
    context.exchange(partner, mine + give.begin * element, (give.end - give.begin) * element, partner, incoming,
                     keep_count * element, step);
    std::uint8_t* kept = mine + keep.begin * element;
    if (rank < partner) {
      reduce(kept, incoming, keep_count, dtype, summing);
    } else {
      combine(kept, incoming, kept, keep_count, dtype, summing);
    }
    regions[halvings++] = region;
    region = keep;
  }
  if (op == ReduceOp::Avg) {
    divide(mine + region.begin * element, region.end - region.begin, dtype, static_cast<std::size_t>(n));
  }
  // All-gather by doubling, the halvings undone in reverse: each pair swaps the halves it owns.
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
