#include "algorithms/tree.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/reduce.hpp"

namespace comm::algorithms {
namespace {

int lowest_bit(int value, int size) {
  // The root (virtual 0) has every bit below size "free": it sends to 1, 2, 4, ...
  int bit = 1;
  while (bit < size && (value & bit) == 0) bit <<= 1;
  return bit;
}

// Step tags: one tree per call, so the round number is enough.
constexpr std::uint64_t kTreeStep = 0;

}  // namespace

void tree_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root) {
  int n = context.size;
  if (n == 1) return;
  int virtual_rank = context.wrap(context.rank - root);
  int low = lowest_bit(virtual_rank, n);
  if (virtual_rank != 0) {
    int parent = context.wrap(virtual_rank - low + root);
    context.recv_wait(parent, data, bytes, kTreeStep);
  }
  TransferSet sends;
  for (int bit = low >> 1; bit >= 1; bit >>= 1) {  // farthest child first: its subtree is largest
    if (virtual_rank + bit < n) {
      int child = context.wrap(virtual_rank + bit + root);
      sends.add(context.send(child, data, bytes, kTreeStep), child, kTreeStep);
    }
  }
  sends.wait_all(context);
}

void tree_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op, int root) {
  int n = context.size;
  std::size_t bytes = count * element_size(dtype);
  if (n > 1 && count > 0) {
    int virtual_rank = context.wrap(context.rank - root);
    int low = lowest_bit(virtual_rank, n);
    bool has_children = low > 1 && virtual_rank + 1 < n;
    // Children in the reverse order of the broadcast: nearest first (its subtree finishes first).
    std::uint8_t* accumulator = static_cast<std::uint8_t*>(data);
    if (has_children) {
      std::uint8_t* incoming = context.scratch->get(1, bytes);
      if (virtual_rank != 0) {
        std::uint8_t* partial = context.scratch->get(0, bytes);
        std::memcpy(partial, accumulator, bytes);
        accumulator = partial;
      }
      for (int bit = 1; bit < low; bit <<= 1) {
        if (virtual_rank + bit >= n) break;
        int child = context.wrap(virtual_rank + bit + root);
        context.recv_wait(child, incoming, bytes, kTreeStep);
        reduce(accumulator, incoming, count, dtype, op);
      }
    }
    if (virtual_rank != 0) {
      int parent = context.wrap(virtual_rank - low + root);
      context.send_wait(parent, accumulator, bytes, kTreeStep);
    }
  }
  if (op == ReduceOp::Avg && context.rank == root) divide(data, count, dtype, static_cast<std::size_t>(n));
}

void tree_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op) {
  std::size_t bytes = count * element_size(dtype);
  if (context.size == 1 || count == 0) return;
  // Non-roots keep their input in tree_reduce, so the broadcast overwrites it afterwards.
  tree_reduce(context, data, count, dtype, op, 0);
  CollectiveContext broadcast_part = context;
  broadcast_part.step_base += 1;  // same call: the broadcast's messages get a step of their own
  tree_broadcast(broadcast_part, data, bytes, 0);
}

}  // namespace comm::algorithms
