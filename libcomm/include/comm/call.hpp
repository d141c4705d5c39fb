// One operation of a process group as a value: which collective or transfer, its buffers and
// arguments. Every form of every operation comes down to one: ProcessGroup's blocking calls and
// their i-forms, the C API (comm/comm.h) and the PyTorch backend each build a Call and hand it
// to ProcessGroup::start (the i-form: a Work) or ProcessGroup::run (the same call, waited on).
// A Call holds no memory of its own: its buffers and blocks are the caller's, as in the
// per-collective calls.
#pragma once

#include <span>
#include <string_view>

#include "comm/types.hpp"

namespace comm {

constexpr int kAnySource = -1;  // a recv's peer: whichever rank sends first

enum class Operation {
  Broadcast,
  Reduce,
  AllReduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  AllToAllV,
  AllGatherV,
  ReduceScatterV,
  GatherV,
  ScatterV,
  Barrier,
  Send,
  Recv
};

const char* to_string(Operation operation);

struct Call {
  Operation operation = Operation::Barrier;
  // The buffer written: broadcast's, all_reduce's and reduce's (in place), recv's; the output of
  // all_gather (one flat buffer), reduce_scatter, scatter and all_to_all.
  Buffer output = Buffer(nullptr, 0, DType::UInt8);
  // The buffer read: send's; the input of all_gather, gather, reduce_scatter and all_to_all.
  Buffer input = Buffer(nullptr, 0, DType::UInt8);
  // One buffer per rank: gather's outputs and scatter's inputs (on the root), or all_gather's
  // outputs in place of its flat output; all_gather_v's too, each rank's count its output's
  // (then without output_counts).
  std::span<const Buffer> blocks{};
  // all_to_all_v: the elements this rank sends to each rank (from input, packed in rank order)
  // and receives from each (into output, likewise); one per rank of the group. all_gather_v and
  // gather_v: output_counts only, each rank's block of the (root's) output; reduce_scatter_v and
  // scatter_v: input_counts only, each rank's block of the (root's) input. Those four take the
  // same counts on every rank.
  std::span<const std::size_t> input_counts{};
  std::span<const std::size_t> output_counts{};
  ReduceOp op = ReduceOp::Sum;
  int root = 0;  // broadcast, reduce, gather, scatter; the peer of send and recv (kAnySource)
  int tag = 0;   // send, recv
  // The algorithm by name ("ring", ...); empty: the tuner's (or COMM_ALGO's) choice.
  std::string_view algorithm{};
};

}  // namespace comm
