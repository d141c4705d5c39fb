// Direct algorithms: every transfer goes straight between the two ranks concerned, all posted
// at once. For gather and scatter the root's link carries all the data whatever the shape, so
// a tree would only add hops; for all-to-all every pair must exchange distinct data anyway.
// Peers are visited starting at rank + 1, so no rank is everyone's first partner.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/collective_context.hpp"

namespace comm::algorithms {

// Root receives block r from rank r into blocks[r]; blocks[root] is copied from input locally.
void direct_gather(const CollectiveContext& context, const void* input, std::size_t block_bytes,
                   std::span<void* const> blocks, int root);
// Root sends blocks[r] to rank r; everyone receives its block into output.
void direct_scatter(const CollectiveContext& context, void* output, std::size_t block_bytes,
                    std::span<const void* const> blocks, int root);
// Block r of input goes to rank r, landing in block `rank` of its output.
void direct_all_to_all(const CollectiveContext& context, void* output, const void* input, std::size_t block_bytes);
// The uneven all_gather: counts[r] elements of `element` bytes from rank r into blocks[r]; this
// rank's from `input` (left alone when it is its block).
void direct_all_gather_v(const CollectiveContext& context, std::span<void* const> blocks,
                         std::span<const std::size_t> counts, const void* input, std::size_t element);
// gather_v: root receives counts[r] elements of `element` bytes from rank r into its block of
// `output` (packed in rank order); its own from `input` (left alone when it is its block).
void direct_gather_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                     const void* input, std::size_t element, int root);
// scatter_v: root sends block r of `input` (counts[r] elements, packed in rank order) to rank r,
// which receives it into `output`.
void direct_scatter_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                      const void* input, std::size_t element, int root);
// reduce_scatter_v: block r of every rank's `input` (counts[r] elements, packed in rank order)
// goes to rank r, which reduces them in rank order into `output` (which may be its own block of
// `input`). One exchange: each byte crosses one link once, the reduction is the receiver's.
void direct_reduce_scatter_v(const CollectiveContext& context, void* output, std::span<const std::size_t> counts,
                             const void* input, DType dtype, ReduceOp op);
// The uneven all_to_all: input_counts[r] elements of `element` bytes to rank r and
// output_counts[r] from it, blocks packed in rank order; `input` must not be `output`. A block
// whose size differs from what its receiver expects is a MismatchError there.
void direct_all_to_all_v(const CollectiveContext& context, void* output, std::span<const std::size_t> output_counts,
                         const void* input, std::span<const std::size_t> input_counts, std::size_t element);

// Byte offsets of the blocks of `counts` elements of `element` bytes packed in rank order: one
// entry per rank and the total last.
std::vector<std::size_t> block_offsets(std::span<const std::size_t> counts, std::size_t element);
// all_to_all_v's error when a block from rank `from` holds `sent` elements where this rank's
// output_counts expected `expected`.
[[noreturn]] void throw_block_mismatch(const CollectiveContext& context, int from, std::size_t sent,
                                       std::size_t expected);

}  // namespace comm::algorithms
