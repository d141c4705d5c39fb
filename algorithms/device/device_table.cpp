#include "algorithms/device/device_table.hpp"

#include <array>
#include <cstdint>
#include <string>

#include "algorithms/tuner.hpp"
#include "comm/error.hpp"
#include "cuda/memory.hpp"

namespace comm::algorithms {
namespace {

// The adapters: each hands one path the call's buffers in the shape it takes.

void broadcast_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_broadcast(context, *resources.ipc, call.output, call.bytes(), call.root, resources.stream);
}
void broadcast_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_broadcast(context, *resources.staging, call.output, call.bytes(), call.root, resources.stream,
                   ring_chunk_bytes());
}

void all_reduce_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_all_reduce(context, *resources.ipc, call.output, call.count, call.dtype, call.op, resources.stream);
}
void all_reduce_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  // Ranks on one host (the group lends its store for that) stage through a shared segment.
  StagingState& state = *resources.staging;
  transport::SharedArena* shared = resources.store ? state.shared_arena(context, *resources.store) : nullptr;
  if (shared != nullptr) {
    return shared_staged_all_reduce(context, *shared, state, call.output, call.count, call.dtype, call.op,
                                    resources.stream);
  }
  staged_all_reduce(context, state, call.output, call.count, call.dtype, call.op, resources.stream, ring_chunk_bytes());
}

void reduce_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_reduce(context, *resources.ipc, call.output, call.count, call.dtype, call.op, call.root, resources.stream);
}
void reduce_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_reduce(context, *resources.staging, call.output, call.count, call.dtype, call.op, call.root, resources.stream);
}

void all_gather_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  std::size_t block = call.bytes();
  if (call.output_blocks.empty()) {
    return ipc_all_gather(context, *resources.ipc, call.output, call.input, block, resources.stream);
  }
  // One output per rank: peers push into one allocation, gathered flat, then copied out.
  int device = resources.ipc->device();
  cuda::DeviceMemory flat(block * call.output_blocks.size(), device);
  auto* at = static_cast<std::uint8_t*>(flat.data());
  ipc_all_gather(context, *resources.ipc, at, call.input, block, resources.stream);
  for (std::size_t r = 0; r < call.output_blocks.size(); ++r) {
    cuda::copy_async(call.output_blocks[r], at + r * block, block, device, resources.stream);
  }
  cuda::Stream::synchronize_handle(resources.stream, device);  // before the flat buffer is freed
}
void all_gather_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  if (call.output_blocks.empty()) {
    return staged_all_gather(context, *resources.staging, call.output, call.input, call.bytes(), resources.stream,
                             ring_chunk_bytes());
  }
  staged_all_gather(context, *resources.staging, call.output_blocks, call.input, call.bytes(), resources.stream,
                    ring_chunk_bytes());
}

void gather_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_gather(context, *resources.ipc, call.input, call.bytes(), call.output_blocks, call.root, resources.stream);
}
void gather_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_gather(context, *resources.staging, call.input, call.bytes(), call.output_blocks, call.root, resources.stream);
}

void scatter_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_scatter(context, *resources.ipc, call.output, call.bytes(), call.input_blocks, call.root, resources.stream);
}
void scatter_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_scatter(context, *resources.staging, call.output, call.bytes(), call.input_blocks, call.root,
                 resources.stream);
}

void reduce_scatter_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  ipc_reduce_scatter(context, *resources.ipc, call.output, call.input, call.count, call.dtype, call.op,
                     resources.stream);
}
void reduce_scatter_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_reduce_scatter(context, *resources.staging, call.output, call.input, call.count, call.dtype, call.op,
                        resources.stream, ring_chunk_bytes());
}

// call.count: one block's elements.
void all_to_all_ipc(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  std::size_t block = call.bytes(), total = block * static_cast<std::size_t>(context.size);
  if (call.input != call.output) {
    return ipc_all_to_all(context, *resources.ipc, call.output, call.input, block, resources.stream);
  }
  // In place: peers push into this buffer while it is still being sent from.
  int device = resources.ipc->device();
  cuda::DeviceMemory copy(total, device);
  cuda::copy_async(copy.data(), call.input, total, device, resources.stream);
  ipc_all_to_all(context, *resources.ipc, call.output, copy.data(), block, resources.stream);
  cuda::Stream::synchronize_handle(resources.stream, device);  // before the copy is freed
}
void all_to_all_staged(const CollectiveContext& context, const HostCall& call, const DeviceResources& resources) {
  staged_all_to_all(context, *resources.staging, call.output, call.input, call.bytes(), resources.stream);
}

using Path = DevicePath;
// By collective (Collective's order), then path: the IPC path names Direct in fingerprints. Each
// IPC call exchanges with every rank (its announcement and its finish), so every rank hears every
// rank; the staged rooted collectives have ranks that only send, or only receive.
constexpr std::array kTable{
    DeviceEntry{Collective::Broadcast, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, broadcast_ipc},
    DeviceEntry{Collective::Broadcast, Path::Staging, Algorithm::Ring, Hearing::Partial, broadcast_staged},
    DeviceEntry{Collective::Reduce, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, reduce_ipc},
    DeviceEntry{Collective::Reduce, Path::Staging, Algorithm::Direct, Hearing::Partial, reduce_staged},
    DeviceEntry{Collective::AllReduce, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, all_reduce_ipc},
    DeviceEntry{Collective::AllReduce, Path::Staging, Algorithm::Ring, Hearing::EveryRank, all_reduce_staged},
    DeviceEntry{Collective::AllGather, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, all_gather_ipc},
    DeviceEntry{Collective::AllGather, Path::Staging, Algorithm::Ring, Hearing::EveryRank, all_gather_staged},
    DeviceEntry{Collective::ReduceScatter, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, reduce_scatter_ipc},
    DeviceEntry{Collective::ReduceScatter, Path::Staging, Algorithm::Ring, Hearing::EveryRank, reduce_scatter_staged},
    DeviceEntry{Collective::Gather, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, gather_ipc},
    DeviceEntry{Collective::Gather, Path::Staging, Algorithm::Direct, Hearing::Partial, gather_staged},
    DeviceEntry{Collective::Scatter, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, scatter_ipc},
    DeviceEntry{Collective::Scatter, Path::Staging, Algorithm::Direct, Hearing::Partial, scatter_staged},
    DeviceEntry{Collective::AllToAll, Path::Ipc, Algorithm::Direct, Hearing::EveryRank, all_to_all_ipc},
    DeviceEntry{Collective::AllToAll, Path::Staging, Algorithm::Direct, Hearing::EveryRank, all_to_all_staged},
};

constexpr bool in_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<std::size_t>(kTable[i].collective) != i / 2) return false;
    if (kTable[i].path != (i % 2 == 0 ? Path::Ipc : Path::Staging)) return false;
  }
  return true;
}
static_assert(in_order(), "one IPC and one staging entry per collective, in Collective's order");

}  // namespace

const DeviceEntry& find_device_algorithm(Collective collective, DevicePath path) {
  std::size_t row = static_cast<std::size_t>(collective) * 2 + (path == DevicePath::Ipc ? 0 : 1);
  if (row >= kTable.size()) {  // the collectives after all_to_all (a barrier has no buffers)
    throw InvalidArgumentError(std::string(to_string(collective)) +
                               " on GPU buffers is not supported yet: call it on host buffers");
  }
  return kTable[row];
}

}  // namespace comm::algorithms
