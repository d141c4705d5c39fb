// The algorithm table: every algorithm of every collective on host buffers, registered in one
// place (algorithm_table.cpp) with what it needs of the group and the one entry point that runs
// it on a call. The tuner asks the table which algorithms a collective has, the group runs the
// chosen entry, and the loopback tests (tests/test_algorithms_loopback.cpp) run every entry.
//
// Adding an algorithm: its file here (rank arithmetic over CollectiveContext), then one line in
// the table, with an adapter where the call's buffers need arranging for it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "algorithms/hierarchical.hpp"
#include "algorithms/tuner.hpp"
#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm::algorithms {

// One collective call on host buffers, its arguments checked: what every algorithm of the
// collective is handed.
struct HostCall {
  Collective collective = Collective::Barrier;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = -1;
  // Elements each rank brings, as busbw counts them: the buffer of broadcast, all_reduce and
  // reduce; the input of all_gather and gather; the output of scatter and reduce_scatter; one
  // block of all_to_all.
  std::size_t count = 0;
  void* output = nullptr;                   // where the result lands (the buffer of the in-place collectives)
  const void* input = nullptr;              // all_gather, gather, reduce_scatter, all_to_all: this rank's input
  std::vector<void*> output_blocks{};       // gather's outputs on root; all_gather's outputs, one per rank
  std::vector<const void*> input_blocks{};  // scatter's inputs on root
  // all_to_all_v: elements to each rank, then from each (count is then the input's total);
  // all_gather_v, reduce_scatter_v, gather_v, scatter_v: each rank's block (count is this
  // rank's). One vector, not two: every call carries it, mostly empty.
  std::vector<std::size_t> counts{};

  std::size_t bytes() const { return collective == Collective::Barrier ? 0 : count * element_size(dtype); }
  std::span<const std::size_t> input_counts() const { return std::span(counts).first(counts.size() / 2); }
  std::span<const std::size_t> output_counts() const { return std::span(counts).last(counts.size() / 2); }
};

// What the group lends the call's algorithm besides its transport.
struct Resources {
  Choice choice{};                          // the algorithm and its chunks
  const HostLayout* hosts = nullptr;        // the group's ranks by host
  transport::SharedArena* arena = nullptr;  // the group's shared segment; null: none
};

// What an algorithm needs of the group beyond messages.
enum class Requirement {
  None,
  SharedMemory,  // Resources::arena: every rank on this host over shared memory
  Hierarchy,     // Resources::hosts usable(): several hosts, the same number (> 1) of ranks on each
};

// Whether a rank that returns from the algorithm has heard, directly or through the peers it
// heard from, from every rank of the call. Every message carries the call's fingerprint, so then
// its return means every rank made the same call. Partial: some rank may return having heard
// from only some (a tree broadcast's root hears nobody); the group confirms such calls after
// them (confirm_call), so that ranks whose calls differ fail on every rank, in the call.
enum class Hearing { EveryRank, Partial };

using HostEntryPoint = void (*)(const CollectiveContext& context, const HostCall& call, const Resources& resources);

struct AlgorithmEntry {
  Collective collective;
  Algorithm algorithm;
  Requirement requirement;
  Hearing hearing;
  HostEntryPoint run;
};

std::span<const AlgorithmEntry> algorithm_table();
// The entry of `algorithm` for `collective`; null when the collective has no such algorithm.
const AlgorithmEntry* find_algorithm(Collective collective, Algorithm algorithm);

}  // namespace comm::algorithms
