#include "algorithms/direct.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/reduce.hpp"
#include "comm/error.hpp"

namespace comm::algorithms {

std::vector<std::size_t> block_offsets(std::span<const std::size_t> counts, std::size_t element) {
  std::vector<std::size_t> at(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) at[r + 1] = at[r] + counts[r] * element;
  return at;
}

void direct_gather(const CollectiveContext& context, const void* input, std::size_t block_bytes,
                   std::span<void* const> blocks, int root) {
  if (context.rank != root) {
    context.send_wait(root, input, block_bytes, 0);
    return;
  }
  TransferSet receives;
  for (int offset = 1; offset < context.size; ++offset) {
    int peer = context.wrap(root + offset);
    receives.add(context.recv(peer, blocks[static_cast<std::size_t>(peer)], block_bytes, 0), peer, 0);
  }
  if (blocks[static_cast<std::size_t>(root)] != input && block_bytes > 0) {
    std::memmove(blocks[static_cast<std::size_t>(root)], input, block_bytes);
  }
  receives.wait_all(context);
}

void direct_scatter(const CollectiveContext& context, void* output, std::size_t block_bytes,
                    std::span<const void* const> blocks, int root) {
  if (context.rank != root) {
    context.recv_wait(root, output, block_bytes, 0);
    return;
  }
  TransferSet sends;
  for (int offset = 1; offset < context.size; ++offset) {
    int peer = context.wrap(root + offset);
    sends.add(context.send(peer, blocks[static_cast<std::size_t>(peer)], block_bytes, 0), peer, 0);
  }
  if (blocks[static_cast<std::size_t>(root)] != output && block_bytes > 0) {
    std::memmove(output, blocks[static_cast<std::size_t>(root)], block_bytes);
  }
  sends.wait_all(context);
}

void direct_all_to_all(const CollectiveContext& context, void* output, const void* input, std::size_t block_bytes) {
  auto* out = static_cast<std::uint8_t*>(output);
  const auto* in = static_cast<const std::uint8_t*>(input);
  auto block = [&](int rank) { return static_cast<std::size_t>(rank) * block_bytes; };
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    int from = context.wrap(context.rank - offset);
    transfers.add(context.recv(from, out + block(from), block_bytes, 0), from, 0);
  }
  for (int offset = 1; offset < context.size; ++offset) {
    int to = context.wrap(context.rank + offset);
    transfers.add(context.send(to, in + block(to), block_bytes, 0), to, 0);
  }
  if (block_bytes > 0) std::memmove(out + block(context.rank), in + block(context.rank), block_bytes);
  transfers.wait_all(context);
}

void direct_all_gather_v(const CollectiveContext& context, std::span<void* const> blocks,
                         std::span<const std::size_t> counts, const void* input, std::size_t element) {
  auto mine = static_cast<std::size_t>(context.rank);
  std::size_t own = counts[mine] * element;
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    auto from = static_cast<std::size_t>(context.wrap(context.rank - offset));
    transfers.add(context.recv(static_cast<int>(from), blocks[from], counts[from] * element, 0), static_cast<int>(from),
                  0);
  }
  for (int offset = 1; offset < context.size; ++offset) {
    int to = context.wrap(context.rank + offset);
    transfers.add(context.send(to, input, own, 0), to, 0);
  }
  if (own > 0 && blocks[mine] != input) std::memmove(blocks[mine], input, own);
  transfers.wait_all(context);
}

void direct_all_to_all_v(const CollectiveContext& context, void* output, std::span<const std::size_t> output_counts,
                         const void* input, std::span<const std::size_t> input_counts, std::size_t element) {
  auto* out = static_cast<std::uint8_t*>(output);
  const auto* in = static_cast<const std::uint8_t*>(input);
  std::vector<std::size_t> out_at = block_offsets(output_counts, element), in_at = block_offsets(input_counts, element);
  auto bytes_of = [](const std::vector<std::size_t>& at, int rank) {
    return at[static_cast<std::size_t>(rank) + 1] - at[static_cast<std::size_t>(rank)];
  };
  // A rank that disagrees with itself fails before anything moves.
  std::size_t own = bytes_of(in_at, context.rank);
  if (own != bytes_of(out_at, context.rank)) {
    throw MismatchError(std::string(context.op) + ": rank " + std::to_string(context.rank) + " sends itself " +
                            std::to_string(own / element) + " elements (input_counts) but expects " +
                            std::to_string(bytes_of(out_at, context.rank) / element) + " (output_counts)",
                        ErrorContext{.rank = context.rank, .peer = context.rank, .op = context.op});
  }
  struct Arrival {
    Transfer transfer;
    int from;
  };
  std::vector<Arrival> arrivals;
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    int from = context.wrap(context.rank - offset);
    Transfer receive = context.recv(from, out + out_at[static_cast<std::size_t>(from)], bytes_of(out_at, from), 0);
    arrivals.push_back({receive, from});
    transfers.add(std::move(receive), from, 0);
  }
  for (int offset = 1; offset < context.size; ++offset) {
    int to = context.wrap(context.rank + offset);
    transfers.add(context.send(to, in + in_at[static_cast<std::size_t>(to)], bytes_of(in_at, to), 0), to, 0);
  }
  if (own > 0) {
    std::memmove(out + out_at[static_cast<std::size_t>(context.rank)], in + in_at[static_cast<std::size_t>(context.rank)],
                 own);
  }
  transfers.wait_all(context);
  for (const auto& arrival : arrivals) {
    std::size_t expected = bytes_of(out_at, arrival.from);
    if (arrival.transfer && arrival.transfer->bytes() != expected) {
      throw_block_mismatch(context, arrival.from, arrival.transfer->bytes() / element, expected / element);
    }
  }
}

void throw_block_mismatch(const CollectiveContext& context, int from, std::size_t sent, std::size_t expected) {
  // Every rank's error says it (the group stops over this one): both ranks by number.
  throw MismatchError(std::string(context.op) + ": rank " + std::to_string(from) + " sent rank " +
                          std::to_string(context.rank) + " " + std::to_string(sent) + " elements, where rank " +
                          std::to_string(context.rank) + " expected " + std::to_string(expected) +
                          " (its output_counts[" + std::to_string(from) +
                          "]); every rank's input_counts[r] must equal rank r's output_counts for it",
                      ErrorContext{.rank = context.rank, .peer = from, .op = context.op});
}

void direct_gather_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                     const void* input, std::size_t element, int root) {
  std::vector<std::size_t> at = block_offsets(counts, element);
  auto block = [&](int rank) { return at[static_cast<std::size_t>(rank) + 1] - at[static_cast<std::size_t>(rank)]; };
  if (context.rank != root) {
    context.send_wait(root, input, block(context.rank), 0);
    return;
  }
  auto* out = static_cast<std::uint8_t*>(output);
  TransferSet receives;
  for (int offset = 1; offset < context.size; ++offset) {
    int peer = context.wrap(root + offset);
    receives.add(context.recv(peer, out + at[static_cast<std::size_t>(peer)], block(peer), 0), peer, 0);
  }
  std::uint8_t* own = out + at[static_cast<std::size_t>(root)];
  if (block(root) > 0 && own != input) std::memmove(own, input, block(root));
  receives.wait_all(context);
}

void direct_scatter_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                      const void* input, std::size_t element, int root) {
  std::vector<std::size_t> at = block_offsets(counts, element);
  auto block = [&](int rank) { return at[static_cast<std::size_t>(rank) + 1] - at[static_cast<std::size_t>(rank)]; };
  if (context.rank != root) {
    context.recv_wait(root, output, block(context.rank), 0);
    return;
  }
  const auto* in = static_cast<const std::uint8_t*>(input);
  TransferSet sends;
  for (int offset = 1; offset < context.size; ++offset) {
    int peer = context.wrap(root + offset);
    sends.add(context.send(peer, in + at[static_cast<std::size_t>(peer)], block(peer), 0), peer, 0);
  }
  const std::uint8_t* own = in + at[static_cast<std::size_t>(root)];
  if (block(root) > 0 && own != output) std::memmove(output, own, block(root));
  sends.wait_all(context);
}

void direct_reduce_scatter_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                             const void* input, DType dtype, ReduceOp op) {
  std::size_t element = element_size(dtype);
  std::vector<std::size_t> at = block_offsets(counts, element);
  auto n = static_cast<std::size_t>(context.size);
  auto me = static_cast<std::size_t>(context.rank);
  std::size_t count = counts[me], mine = count * element;
  const auto* in = static_cast<const std::uint8_t*>(input);
  // Every rank's copy of this rank's block, in rank order: the result is reduced in that order
  // whatever order they arrive in. This rank's own is copied too, since output may be it.
  std::uint8_t* blocks = context.scratch->get(2, mine * n);
  TransferSet transfers;
  for (int offset = 1; offset < context.size; ++offset) {
    int from = context.wrap(context.rank - offset);
    transfers.add(context.recv(from, blocks + static_cast<std::size_t>(from) * mine, mine, 0), from, 0);
  }
  for (int offset = 1; offset < context.size; ++offset) {
    auto to = static_cast<std::size_t>(context.wrap(context.rank + offset));
    transfers.add(context.send(static_cast<int>(to), in + at[to], at[to + 1] - at[to], 0), static_cast<int>(to), 0);
  }
  if (mine > 0) std::memcpy(blocks + me * mine, in + at[me], mine);
  transfers.wait_all(context);
  if (mine == 0) return;
  if (n == 1) {
    std::memmove(output, blocks, mine);
  } else {
    combine(output, blocks, blocks + mine, count, dtype, op);
    for (std::size_t r = 2; r < n; ++r) reduce(output, blocks + r * mine, count, dtype, op);
  }
  if (op == ReduceOp::Avg) divide(output, count, dtype, n);
}

}  // namespace comm::algorithms
