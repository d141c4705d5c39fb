#include "algorithms/small_message.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/reduce.hpp"
#include "algorithms/shared_memory.hpp"

namespace comm::algorithms {

void recursive_doubling_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                                   ReduceOp op) {
  int n = context.size;
  std::size_t bytes = count * element_size(dtype);
  if (n > 1 && count > 0) {
    auto* mine = static_cast<std::uint8_t*>(data);
    std::uint8_t* incoming = context.scratch->get(0, bytes);
    int power = 1;
    while (power * 2 <= n) power *= 2;
    int rank = context.rank;
    std::uint64_t step = 0;
    // Fold: extra rank p + i gives its data to rank i and waits for the result.
    if (rank >= power) {
      context.send_wait(rank - power, mine, bytes, step);
      context.recv_wait(rank - power, mine, bytes, step + 1);
    } else {
      if (rank + power < n) {
        context.recv_wait(rank + power, incoming, bytes, step);
        reduce(mine, incoming, count, dtype, op);  // lower rank's data first
      }
      step = 2;
      for (int distance = 1; distance < power; distance <<= 1, ++step) {
        int partner = rank ^ distance;
        context.exchange(partner, mine, bytes, partner, incoming, bytes, step);
        if (rank < partner) {
          reduce(mine, incoming, count, dtype, op);
        } else {
          reduce(incoming, mine, count, dtype, op);
          std::memcpy(mine, incoming, bytes);
        }
      }
      if (op == ReduceOp::Avg) divide(mine, count, dtype, static_cast<std::size_t>(n));
      if (rank + power < n) context.send_wait(rank + power, mine, bytes, 1);
    }
    return;
  }
  if (op == ReduceOp::Avg) divide(data, count, dtype, static_cast<std::size_t>(n));
}

void recursive_doubling_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                               ReduceOp op, int root) {
  void* working = data;
  if (context.rank != root) {
    std::size_t bytes = count * element_size(dtype);
    working = context.scratch->get(1, bytes);  // slot 0 is the all-reduce's
    if (bytes > 0) std::memcpy(working, data, bytes);
  }
  recursive_doubling_all_reduce(context, working, count, dtype, op);
}

void dissemination_barrier(const CollectiveContext& context) {
  std::uint64_t round = 0;
  for (int distance = 1; distance < context.size; distance <<= 1, ++round) {
    context.exchange(context.wrap(context.rank + distance), nullptr, 0, context.wrap(context.rank - distance), nullptr,
                     0, round);
  }
}

void dissemination_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root) {
  int n = context.size;
  int virtual_rank = context.wrap(context.rank - root);
  std::uint64_t round = 0;
  for (int distance = 1; distance < n; distance <<= 1, ++round) {
    // Before this round, virtual ranks below `distance` have the data.
    auto has = [distance](int rank) { return rank < distance; };
    int to = context.wrap(virtual_rank + distance), from = context.wrap(virtual_rank - distance);
    std::size_t send_bytes = has(virtual_rank) && !has(to) ? bytes : 0;
    std::size_t recv_bytes = has(from) && !has(virtual_rank) ? bytes : 0;
    context.exchange(context.wrap(to + root), data, send_bytes, context.wrap(from + root), data, recv_bytes, round);
  }
}

void confirm_call(const CollectiveContext& context, transport::SharedArena* arena) {
  CollectiveContext confirmation = context;
  confirmation.step_base = context.step_base + kAlgorithmSteps;
  confirmation.step_space = kConfirmSteps;
  // The segment's barrier is one line each way per rank (4 ranks on 2 cores: an 8-byte
  // all_to_all_v 31.5 us with the messages' barrier, whose ranks fall asleep between rounds).
  if (arena != nullptr && context.size > 1) {
    shared_memory_barrier(confirmation, *arena);
    return;
  }
  dissemination_barrier(confirmation);
}

}  // namespace comm::algorithms
