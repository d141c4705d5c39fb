// The collectives on GPU buffers: CUDA IPC among the ranks of one host, else staging through
// pinned host memory (docs/cuda.md; gpu_path in group.cpp). Arguments are checked already
// (collectives.cpp). Each call hands on_device its two forms; the host then waits for the
// group's stream, so the call (or its Work) completes when the stream has run the operation.
#include <memory>
#include <string>
#include <vector>

#include "algorithms/device/ipc_collectives.hpp"
#include "algorithms/device/staged_collectives.hpp"
#include "algorithms/tuner.hpp"
#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/src/collective_call.hpp"

namespace comm {

using algorithms::CollectiveContext;
using algorithms::IpcState;
using algorithms::StagingState;

// What the fingerprint of a GPU call is made of. It names the path's algorithm, so ranks that
// took different paths get a mismatch error, not a hang.
struct ProcessGroup::Impl::DeviceCall {
  Collective collective;
  const Buffer& buffer;  // the call's device buffer (any of them: all are on one device)
  const Buffer* typed;   // the buffer whose dtype and count the fingerprint takes
  int op = -1, root = -1;
  Algorithm staged = Algorithm::Ring;  // what the staged path runs
};

// `ipc` and `staged` get the context, the path's state and the group's stream.
template <class Ipc, class Staged>
std::shared_ptr<Work> ProcessGroup::Impl::on_device(const DeviceCall& call, Ipc ipc, Staged staged, bool async) {
  const char* op = to_string(call.collective);
  bool through_ipc = gpu_path(op) == GpuPath::Ipc;
  int device = call.buffer.device.index;
  IpcState* ipc_state = nullptr;  // the path's state, made on first use; one is null
  StagingState* staging_state = nullptr;
  int in_use = 0;
  if (through_ipc) {
    if (!ipc_) ipc_ = std::make_unique<IpcState>(device, size());
    ipc_state = ipc_.get();
    in_use = ipc_state->device();
  } else {
    if (!staging_) staging_ = std::make_unique<StagingState>(device);
    staging_state = staging_.get();
    in_use = staging_state->device();
  }
  COMM_CHECK(in_use == device, InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "this group's GPU collectives use cuda:" + std::to_string(in_use) + ", not " +
                 to_string(call.buffer.device) + "; use one device per rank and group");
  std::uint64_t fingerprint = call_fingerprint(call.collective, through_ipc ? Algorithm::Direct : call.staged,
                                               call.typed, call.op, call.root, call.typed->count);
  void* stream = cuda_stream_;
  return start_collective(
      CallShape{call.collective, static_cast<int>(call.buffer.dtype), call.typed->count, call.root},
      call.buffer.bytes(), fingerprint,
      [=](const CollectiveContext& context) {
        if (ipc_state != nullptr) {
          ipc(context, *ipc_state, stream);
        } else {
          staged(context, *staging_state, stream);
        }
        cuda::Stream::synchronize_handle(stream, device);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_broadcast(Buffer buffer, int root, bool async) {
  return on_device(
      {Collective::Broadcast, buffer, &buffer, -1, root},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_broadcast(context, state, buffer.data, buffer.bytes(), root, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_broadcast(context, state, buffer.data, buffer.bytes(), root, stream,
                                     algorithms::ring_chunk_bytes());
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_all_reduce(Buffer buffer, ReduceOp op, bool async) {
  bool one_host = arena_ != nullptr;
  Store* store = store_.get();
  return on_device(
      {Collective::AllReduce, buffer, &buffer, static_cast<int>(op)},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_all_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        // Ranks on one host (the group has a host arena) stage through a shared segment.
        transport::SharedArena* shared = one_host ? state.shared_arena(context, *store) : nullptr;
        if (shared != nullptr) {
          return algorithms::shared_staged_all_reduce(context, *shared, state, buffer.data, buffer.count, buffer.dtype,
                                                      op, stream);
        }
        algorithms::staged_all_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op, stream,
                                      algorithms::ring_chunk_bytes());
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_reduce(Buffer buffer, int root, ReduceOp op, bool async) {
  return on_device(
      {Collective::Reduce, buffer, &buffer, static_cast<int>(op), root, Algorithm::Direct},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op, root, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op, root, stream);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_all_gather(Buffer output, Buffer input, bool async) {
  std::size_t block = input.bytes();
  return on_device(
      {Collective::AllGather, output, &input},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_all_gather(context, state, output.data, input.data, block, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_all_gather(context, state, output.data, input.data, block, stream,
                                      algorithms::ring_chunk_bytes());
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_all_gather(std::vector<void*> outputs, Buffer input, bool async) {
  std::size_t block = input.bytes();
  int device = input.device.index;
  return on_device(
      {Collective::AllGather, input, &input},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        // Peers push into one allocation, gathered flat, then copied out.
        cuda::DeviceMemory flat(block * outputs.size(), device);
        auto* at = static_cast<std::uint8_t*>(flat.data());
        algorithms::ipc_all_gather(context, state, at, input.data, block, stream);
        for (std::size_t r = 0; r < outputs.size(); ++r)
          cuda::copy_async(outputs[r], at + r * block, block, device, stream);
        cuda::Stream::synchronize_handle(stream, device);  // before the flat buffer is freed
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_all_gather(context, state, outputs, input.data, block, stream,
                                      algorithms::ring_chunk_bytes());
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_gather(Buffer input, std::vector<void*> outputs, int root,
                                                        bool async) {
  return on_device(
      {Collective::Gather, input, &input, -1, root, Algorithm::Direct},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_gather(context, state, input.data, input.bytes(), outputs, root, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_gather(context, state, input.data, input.bytes(), outputs, root, stream);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_scatter(Buffer output, std::vector<const void*> inputs, int root,
                                                         bool async) {
  return on_device(
      {Collective::Scatter, output, &output, -1, root, Algorithm::Direct},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_scatter(context, state, output.data, output.bytes(), inputs, root, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_scatter(context, state, output.data, output.bytes(), inputs, root, stream);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_reduce_scatter(Buffer output, Buffer input, ReduceOp op, bool async) {
  return on_device(
      {Collective::ReduceScatter, output, &output, static_cast<int>(op)},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        algorithms::ipc_reduce_scatter(context, state, output.data, input.data, output.count, output.dtype, op, stream);
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_reduce_scatter(context, state, output.data, input.data, output.count, output.dtype, op,
                                          stream, algorithms::ring_chunk_bytes());
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::device_all_to_all(Buffer output, Buffer input, bool async) {
  return on_device(
      {Collective::AllToAll, output, &input, -1, -1, Algorithm::Direct},
      [=](const CollectiveContext& context, IpcState& state, void* stream) {
        std::size_t block = input.bytes() / static_cast<std::size_t>(context.size);
        if (input.data != output.data) {
          return algorithms::ipc_all_to_all(context, state, output.data, input.data, block, stream);
        }
        // In place: peers push into this buffer while it is still being sent from.
        cuda::DeviceMemory copy(input.bytes(), input.device.index);
        cuda::copy_async(copy.data(), input.data, input.bytes(), input.device.index, stream);
        algorithms::ipc_all_to_all(context, state, output.data, copy.data(), block, stream);
        cuda::Stream::synchronize_handle(stream, input.device.index);  // before the copy is freed
      },
      [=](const CollectiveContext& context, StagingState& state, void* stream) {
        algorithms::staged_all_to_all(context, state, output.data, input.data,
                                      input.bytes() / static_cast<std::size_t>(context.size), stream);
      },
      async);
}

}  // namespace comm
