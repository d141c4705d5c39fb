#include "algorithms/direct.hpp"

#include <cstdint>
#include <cstring>

namespace comm::algorithms {

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

}  // namespace comm::algorithms
