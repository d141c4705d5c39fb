#include "algorithms/algorithm_table.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/bruck.hpp"
#include "algorithms/direct.hpp"
#include "algorithms/halving_doubling.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/shared_memory.hpp"
#include "algorithms/small_message.hpp"
#include "algorithms/tree.hpp"

namespace comm::algorithms {
namespace {

// The adapters: each hands one algorithm the call's buffers in the shape it takes.

std::uint8_t* bytes_at(const void* data) { return static_cast<std::uint8_t*>(const_cast<void*>(data)); }

void broadcast_ring(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  ring_broadcast(context, call.output, call.bytes(), call.root, resources.choice.chunk_bytes);
}
void broadcast_tree(const CollectiveContext& context, const HostCall& call, const Resources&) {
  tree_broadcast(context, call.output, call.bytes(), call.root);
}
void broadcast_dissemination(const CollectiveContext& context, const HostCall& call, const Resources&) {
  dissemination_broadcast(context, call.output, call.bytes(), call.root);
}
void broadcast_hierarchical(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  hierarchical_broadcast(context, *resources.hosts, call.output, call.bytes(), call.root, resources.choice.chunk_bytes,
                         resources.choice.link_chunk_bytes);
}

void all_reduce_ring(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  ring_all_reduce(context, call.output, call.count, call.dtype, call.op, resources.choice.chunk_bytes);
}
void all_reduce_tree(const CollectiveContext& context, const HostCall& call, const Resources&) {
  tree_all_reduce(context, call.output, call.count, call.dtype, call.op);
}
void all_reduce_recursive_doubling(const CollectiveContext& context, const HostCall& call, const Resources&) {
  recursive_doubling_all_reduce(context, call.output, call.count, call.dtype, call.op);
}
void all_reduce_halving_doubling(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  halving_doubling_all_reduce(context, call.output, call.count, call.dtype, call.op, resources.choice.chunk_bytes);
}
void all_reduce_shared_memory(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  if (context.size == 1) return;  // nothing to combine (an average divides by one)
  shared_memory_all_reduce(context, *resources.arena, call.output, call.count, call.dtype, call.op);
}
void all_reduce_hierarchical(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  hierarchical_all_reduce(context, *resources.hosts, call.output, call.count, call.dtype, call.op,
                          resources.choice.chunk_bytes, resources.choice.link_chunk_bytes,
                          resources.choice.across_hosts);
}

void reduce_ring(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  ring_reduce(context, call.output, call.count, call.dtype, call.op, call.root, resources.choice.chunk_bytes);
}
void reduce_tree(const CollectiveContext& context, const HostCall& call, const Resources&) {
  tree_reduce(context, call.output, call.count, call.dtype, call.op, call.root);
}
void reduce_recursive_doubling(const CollectiveContext& context, const HostCall& call, const Resources&) {
  recursive_doubling_reduce(context, call.output, call.count, call.dtype, call.op, call.root);
}
void reduce_hierarchical(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  hierarchical_reduce(context, *resources.hosts, call.output, call.count, call.dtype, call.op, call.root,
                      resources.choice.chunk_bytes, resources.choice.link_chunk_bytes);
}

void all_gather_ring(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  std::size_t block = call.bytes();
  auto rank = static_cast<std::size_t>(context.rank);
  if (!call.output_blocks.empty()) {
    // One output per rank: gathered flat, then copied out (the ring wants one buffer).
    std::uint8_t* flat = context.scratch->get(2, block * call.output_blocks.size());
    if (block > 0) std::memcpy(flat + rank * block, call.input, block);
    ring_all_gather(context, flat, block, resources.choice.chunk_bytes);
    for (std::size_t r = 0; r < call.output_blocks.size(); ++r) {
      if (block > 0) std::memcpy(call.output_blocks[r], flat + r * block, block);
    }
    return;
  }
  std::uint8_t* own = bytes_at(call.output) + rank * block;
  if (own != call.input && block > 0) std::memmove(own, call.input, block);
  ring_all_gather(context, call.output, block, resources.choice.chunk_bytes);
}
void all_gather_hierarchical(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  hierarchical_all_gather(context, *resources.hosts, call.output, call.input, call.bytes(),
                          resources.choice.chunk_bytes, resources.choice.link_chunk_bytes);
}

void reduce_scatter_ring(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  std::size_t block = call.bytes();
  auto n = static_cast<std::size_t>(context.size);
  std::uint8_t* data = bytes_at(call.input);
  // The ring reduces in place, so an out-of-place call works on a copy of the input.
  if (data + static_cast<std::size_t>(context.rank) * block != call.output && block > 0) {
    data = context.scratch->get(2, block * n);
    std::memcpy(data, call.input, block * n);
  }
  ring_reduce_scatter(context, data, call.count, call.dtype, call.op, resources.choice.chunk_bytes);
  std::uint8_t* reduced = data + static_cast<std::size_t>(context.rank) * block;
  if (reduced != call.output && block > 0) std::memcpy(call.output, reduced, block);
}
void reduce_scatter_hierarchical(const CollectiveContext& context, const HostCall& call, const Resources& resources) {
  hierarchical_reduce_scatter(context, *resources.hosts, call.output, call.input, call.count, call.dtype, call.op,
                              resources.choice.chunk_bytes, resources.choice.link_chunk_bytes);
}

void gather_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  direct_gather(context, call.input, call.bytes(), call.output_blocks, call.root);
}
void scatter_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  direct_scatter(context, call.output, call.bytes(), call.input_blocks, call.root);
}
void all_to_all_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  std::size_t block = call.bytes();
  const void* source = call.input;
  if (call.input == call.output && block > 0) {  // in place: send from a copy
    std::size_t all = block * static_cast<std::size_t>(context.size);
    std::uint8_t* copy = context.scratch->get(2, all);
    std::memcpy(copy, call.input, all);
    source = copy;
  }
  direct_all_to_all(context, call.output, source, block);
}

void all_to_all_v_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  std::size_t element = element_size(call.dtype);
  const void* source = call.input;
  if (call.input == call.output && call.count > 0) {  // in place: send from a copy
    std::uint8_t* copy = context.scratch->get(2, call.count * element);
    std::memcpy(copy, call.input, call.count * element);
    source = copy;
  }
  direct_all_to_all_v(context, call.output, call.output_counts(), source, call.input_counts(), element);
}

// Into one output per rank, or into the blocks of the flat output.
// In place needs no copy: every block is taken from the input before the output is written.
void all_to_all_v_bruck(const CollectiveContext& context, const HostCall& call, const Resources&) {
  bruck_all_to_all_v(context, call.output, call.output_counts(), call.input, call.input_counts(),
                     element_size(call.dtype));
}

void all_gather_v_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  std::size_t element = element_size(call.dtype);
  if (!call.output_blocks.empty()) {
    direct_all_gather_v(context, call.output_blocks, call.counts, call.input, element);
    return;
  }
  std::vector<void*> blocks;
  std::uint8_t* at = bytes_at(call.output);
  for (std::size_t count : call.counts) {
    blocks.push_back(at);
    at += count * element;
  }
  direct_all_gather_v(context, blocks, call.counts, call.input, element);
}

void reduce_scatter_v_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  direct_reduce_scatter_v(context, call.output, call.counts, call.input, call.dtype, call.op);
}
void gather_v_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  direct_gather_v(context, call.output, call.counts, call.input, element_size(call.dtype), call.root);
}
void scatter_v_direct(const CollectiveContext& context, const HostCall& call, const Resources&) {
  direct_scatter_v(context, call.output, call.counts, call.input, element_size(call.dtype), call.root);
}

void barrier_dissemination(const CollectiveContext& context, const HostCall&, const Resources&) {
  dissemination_barrier(context);
}
// A group of one has no segment (nobody to share it with), and nobody to wait for.
void barrier_shared_memory(const CollectiveContext& context, const HostCall&, const Resources& resources) {
  if (context.size == 1) return;
  shared_memory_barrier(context, *resources.arena);
}

using enum Collective;
using enum Requirement;
using enum Hearing;

constexpr std::array kTable{
    AlgorithmEntry{Broadcast, Algorithm::Ring, None, Partial, broadcast_ring},
    AlgorithmEntry{Broadcast, Algorithm::Tree, None, Partial, broadcast_tree},
    AlgorithmEntry{Broadcast, Algorithm::Hierarchical, Hierarchy, Partial, broadcast_hierarchical},
    AlgorithmEntry{Broadcast, Algorithm::Dissemination, None, EveryRank, broadcast_dissemination},
    AlgorithmEntry{AllReduce, Algorithm::Ring, None, EveryRank, all_reduce_ring},
    AlgorithmEntry{AllReduce, Algorithm::Tree, None, EveryRank, all_reduce_tree},
    AlgorithmEntry{AllReduce, Algorithm::RecursiveDoubling, None, EveryRank, all_reduce_recursive_doubling},
    AlgorithmEntry{AllReduce, Algorithm::HalvingDoubling, None, EveryRank, all_reduce_halving_doubling},
    AlgorithmEntry{AllReduce, Algorithm::SharedMemory, SharedMemory, EveryRank, all_reduce_shared_memory},
    AlgorithmEntry{AllReduce, Algorithm::Hierarchical, Hierarchy, EveryRank, all_reduce_hierarchical},
    AlgorithmEntry{Reduce, Algorithm::Ring, None, Partial, reduce_ring},
    AlgorithmEntry{Reduce, Algorithm::Tree, None, Partial, reduce_tree},
    AlgorithmEntry{Reduce, Algorithm::Hierarchical, Hierarchy, Partial, reduce_hierarchical},
    AlgorithmEntry{Reduce, Algorithm::RecursiveDoubling, None, EveryRank, reduce_recursive_doubling},
    AlgorithmEntry{AllGather, Algorithm::Ring, None, EveryRank, all_gather_ring},
    AlgorithmEntry{AllGather, Algorithm::Hierarchical, Hierarchy, EveryRank, all_gather_hierarchical},
    AlgorithmEntry{ReduceScatter, Algorithm::Ring, None, EveryRank, reduce_scatter_ring},
    AlgorithmEntry{ReduceScatter, Algorithm::Hierarchical, Hierarchy, EveryRank, reduce_scatter_hierarchical},
    AlgorithmEntry{Gather, Algorithm::Direct, None, Partial, gather_direct},
    AlgorithmEntry{Scatter, Algorithm::Direct, None, Partial, scatter_direct},
    AlgorithmEntry{AllToAll, Algorithm::Direct, None, EveryRank, all_to_all_direct},
    // Partial: a rank's return proves every rank made the call, not that their counts agree; a
    // disagreement is seen by its receiver only, so the call is confirmed after it.
    AlgorithmEntry{AllToAllV, Algorithm::Direct, None, Partial, all_to_all_v_direct},
    AlgorithmEntry{AllToAllV, Algorithm::Bruck, None, Partial, all_to_all_v_bruck},
    // Every rank hears every rank, and all of them fingerprint the same counts.
    AlgorithmEntry{AllGatherV, Algorithm::Direct, None, EveryRank, all_gather_v_direct},
    AlgorithmEntry{ReduceScatterV, Algorithm::Direct, None, EveryRank, reduce_scatter_v_direct},
    // As gather and scatter: only the root hears every rank.
    AlgorithmEntry{GatherV, Algorithm::Direct, None, Partial, gather_v_direct},
    AlgorithmEntry{ScatterV, Algorithm::Direct, None, Partial, scatter_v_direct},
    AlgorithmEntry{Barrier, Algorithm::Dissemination, None, EveryRank, barrier_dissemination},
    AlgorithmEntry{Barrier, Algorithm::SharedMemory, SharedMemory, EveryRank, barrier_shared_memory},
};

// The table's row for each (collective, algorithm), or -1: every call looks its algorithm up,
// so a lookup is one load rather than a search.
constexpr int kCollectives = static_cast<int>(Collective::Barrier) + 1;
constexpr int kAlgorithms = static_cast<int>(Algorithm::Bruck) + 1;
constexpr auto kRows = [] {
  std::array<std::array<int, kAlgorithms>, kCollectives> rows{};
  for (auto& row : rows) row.fill(-1);
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    rows[static_cast<std::size_t>(kTable[i].collective)][static_cast<std::size_t>(kTable[i].algorithm)] =
        static_cast<int>(i);
  }
  return rows;
}();

}  // namespace

std::span<const AlgorithmEntry> algorithm_table() { return kTable; }

const AlgorithmEntry* find_algorithm(Collective collective, Algorithm algorithm) {
  auto c = static_cast<std::size_t>(collective), a = static_cast<std::size_t>(algorithm);
  if (c >= kRows.size() || a >= kRows[c].size() || kRows[c][a] < 0) return nullptr;
  return &kTable[static_cast<std::size_t>(kRows[c][a])];
}

}  // namespace comm::algorithms
