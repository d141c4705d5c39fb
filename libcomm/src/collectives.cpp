// The collectives of ProcessGroup: argument checks on the calling rank, a sequence number, the
// tuner's choice, then the algorithm, inline (blocking forms) or through the group's queue
// (i-forms). Each collective is written once, in CollectiveCalls, with a flag for the form.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "cuda/memory.hpp"
#include "collective_context.hpp"
#include "collective_queue.hpp"
#include "comm/process_group.hpp"
#include "direct.hpp"
#include "ipc_collectives.hpp"
#include "fingerprint.hpp"
#include "reduce.hpp"
#include "ring.hpp"
#include "shared_memory.hpp"
#include "staged_collectives.hpp"
#include "small_message.hpp"
#include "transport.hpp"
#include "tree.hpp"
#include "tuner.hpp"

namespace comm {

using algorithms::Collective;
using algorithms::CollectiveContext;

template <class Body>
std::shared_ptr<Work> ProcessGroup::start_collective(Collective collective, std::size_t bytes, std::uint64_t fingerprint,
                                                     Body body, bool async) {
  const char* op = algorithms::to_string(collective);
  std::uint64_t sequence = collective_sequence_++;
  auto run = [this, op, sequence, fingerprint, body = std::move(body)] {
    CollectiveContext context{*transport_, rank(), size(), sequence, timeout_, op, layout_.id, layout_.members, 0,
                              fingerprint, scratch_.get()};
    try {
      body(context);
    } catch (Error& error) {
      error.add_context(ErrorContext{.rank = rank(), .op = op, .sequence = static_cast<std::int64_t>(sequence)});
      // Transfers of the failed call may still be posted into its buffers, and peers may be
      // waiting for data this rank will not send: stop the transport, which tells them, so
      // nothing lands here later and nobody waits out a timeout (as with NCCL, a group is
      // unusable after a failed call). Argument checks fail before the call starts, not here:
      // an InvalidArgumentError here is the transport's (a message that did not fit).
      transport_->abort(error.what());
      throw;
    }
  };
  if (!async) {
    queue_->run(run);
    return nullptr;
  }
  auto completion = queue_->submit(std::move(run), bytes);
  return std::make_shared<Work>(std::move(completion), timeout_,
                                detail::WorkLabel{op, rank(), -1, static_cast<std::int64_t>(sequence), bytes});
}

void ProcessGroup::check_root(int root, const char* op) const {
  COMM_CHECK(root >= 0 && root < size(), InvalidArgumentError, (ErrorContext{.rank = rank(), .op = op}),
             "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size()) +
                 " ranks (valid: 0.." + std::to_string(size() - 1) + ")");
}

struct CollectiveCalls {
  static std::uint8_t* bytes_of(const Buffer& buffer) { return static_cast<std::uint8_t*>(buffer.data); }

  static void check_pair(const ProcessGroup& group, const Buffer& a, const Buffer& b, const char* op) {
    COMM_CHECK(a.dtype == b.dtype, InvalidArgumentError, (ErrorContext{.rank = group.rank(), .op = op}),
               std::string("the input is ") + to_string(b.dtype) + " and the output " + to_string(a.dtype) +
                   "; both must have the same dtype");
    COMM_CHECK(a.device.kind == b.device.kind && a.device.index == b.device.index, InvalidArgumentError,
               (ErrorContext{.rank = group.rank(), .op = op}),
               "the input is on " + to_string(b.device) + " and the output on " + to_string(a.device) +
                   "; one call takes buffers of one device (mixing host and GPU memory is not allowed)");
  }

  static void check_count(const ProcessGroup& group, bool ok, const char* op, const std::string& message) {
    COMM_CHECK(ok, InvalidArgumentError, (ErrorContext{.rank = group.rank(), .op = op}), message);
  }

  // The call's fingerprint: what every rank must agree on (see fingerprint.hpp).
  static std::uint64_t signature(Collective collective, Algorithm algorithm, const Buffer* buffer, int op, int root,
                                 std::size_t count) {
    bool gpu = buffer != nullptr && buffer->device.kind == Device::Kind::Cuda;
    return detail::fingerprint({static_cast<int>(collective), buffer ? static_cast<int>(buffer->dtype) : -1, op,
                                algorithm, root, count, gpu});
  }

  static Algorithm pick(const ProcessGroup& group, Collective collective, std::size_t bytes, Algorithm requested) {
    return algorithms::choose({collective, bytes, group.size(), requested, group.rank(), group.shared_memory_usable()});
  }

  static std::shared_ptr<Work> broadcast(ProcessGroup& group, Buffer buffer, int root, Algorithm requested, bool async) {
    const char* op = "broadcast";
    group.check_member(op);
    group.check_buffer(buffer, op);
    group.check_root(root, op);
    if (buffer.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::Broadcast, buffer, &buffer, -1, root},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_broadcast(context, state, buffer.data, buffer.bytes(), root, stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_broadcast(context, state, buffer.data, buffer.bytes(), root, stream,
                                         algorithms::ring_chunk_bytes());
          }, async);
    }
    Algorithm algorithm = pick(group, Collective::Broadcast, buffer.bytes(), requested);
    return group.start_collective(Collective::Broadcast, buffer.bytes(),
        signature(Collective::Broadcast, algorithm, &buffer, -1, root, buffer.count), [=](const CollectiveContext& context) {
      if (algorithm == Algorithm::Ring) {
        algorithms::ring_broadcast(context, buffer.data, buffer.bytes(), root, algorithms::ring_chunk_bytes());
      } else {
        algorithms::tree_broadcast(context, buffer.data, buffer.bytes(), root);
      }
    }, async);
  }

  static std::shared_ptr<Work> all_reduce(ProcessGroup& group, Buffer buffer, ReduceOp op_, Algorithm requested,
                                          bool async) {
    const char* op = "all_reduce";
    group.check_member(op);
    group.check_buffer(buffer, op);
    algorithms::check_supported(buffer.dtype, op_, group.rank());
    if (buffer.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::AllReduce, buffer, &buffer, static_cast<int>(op_)},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_all_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op_, stream);
          },
          [=, &group](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            // Ranks on one host (the group has a host arena) stage through a shared segment.
            transport::SharedArena* shared = group.arena_ ? state.shared_arena(context, *group.store_) : nullptr;
            if (shared != nullptr) {
              return algorithms::shared_staged_all_reduce(context, *shared, state, buffer.data, buffer.count,
                                                          buffer.dtype, op_, stream);
            }
            algorithms::staged_all_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op_, stream,
                                          algorithms::ring_chunk_bytes());
          }, async);
    }
    Algorithm algorithm = pick(group, Collective::AllReduce, buffer.bytes(), requested);
    return group.start_collective(Collective::AllReduce, buffer.bytes(),
        signature(Collective::AllReduce, algorithm, &buffer, static_cast<int>(op_), -1, buffer.count), [=, &group](const CollectiveContext& context) {
      switch (algorithm) {
        case Algorithm::Tree: return algorithms::tree_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op_);
        case Algorithm::RecursiveDoubling:
          return algorithms::recursive_doubling_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op_);
        case Algorithm::SharedMemory:
          if (group.size() == 1) return;  // nothing to combine (an average divides by one)
          return algorithms::shared_memory_all_reduce(context, *group.arena_, buffer.data, buffer.count, buffer.dtype,
                                                      op_);
        default:
          return algorithms::ring_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op_,
                                             algorithms::ring_chunk_bytes());
      }
    }, async);
  }

  // GPU buffers: CUDA IPC among the ranks of one host, else staging through pinned host memory
  // (docs/cuda.md; ProcessGroup::gpu_path). `ipc` and `staged` get the context, the path's state
  // and the group's stream; the host waits for the stream at the end, so the call (or its Work)
  // completes when the stream has run the operation. The fingerprint names the path's algorithm,
  // so ranks that took different paths get a mismatch error, not a hang.
  struct DeviceCall {
    Collective collective;
    const Buffer& buffer;  // the call's device buffer (any of them: all are on one device)
    const Buffer* typed;   // the buffer whose dtype and count the fingerprint takes
    int op = -1, root = -1;
    Algorithm staged = Algorithm::Ring;  // what the staged path runs (for the fingerprint)
  };
  template <class Ipc, class Staged>
  static std::shared_ptr<Work> on_device(ProcessGroup& group, const DeviceCall& call, Ipc ipc, Staged staged, bool async) {
    const char* op = algorithms::to_string(call.collective);
    bool through_ipc = group.gpu_path(op) == ProcessGroup::GpuPath::Ipc;
    int device = call.buffer.device.index;
    algorithms::IpcState* ipc_state = nullptr;  // the path's state, made on first use; one is null
    algorithms::StagingState* staging_state = nullptr;
    int in_use = 0;
    if (through_ipc) {
      if (!group.ipc_) group.ipc_ = std::make_unique<algorithms::IpcState>(device, group.size());
      ipc_state = group.ipc_.get();
      in_use = ipc_state->device();
    } else {
      if (!group.staging_) group.staging_ = std::make_unique<algorithms::StagingState>(device);
      staging_state = group.staging_.get();
      in_use = staging_state->device();
    }
    COMM_CHECK(in_use == device, InvalidArgumentError, (ErrorContext{.rank = group.rank(), .op = op}),
               "this group's GPU collectives use cuda:" + std::to_string(in_use) + ", not " + to_string(call.buffer.device) +
                   "; use one device per rank and group");
    std::uint64_t fingerprint = signature(call.collective, through_ipc ? Algorithm::Direct : call.staged, call.typed,
                                          call.op, call.root, call.typed->count);
    void* stream = group.cuda_stream_;
    return group.start_collective(call.collective, call.buffer.bytes(), fingerprint,
        [=](const CollectiveContext& context) {
          if (ipc_state != nullptr) {
            ipc(context, *ipc_state, stream);
          } else {
            staged(context, *staging_state, stream);
          }
          cuda::Stream::synchronize_handle(stream, device);
        }, async);
  }

  static std::shared_ptr<Work> reduce(ProcessGroup& group, Buffer buffer, int root, ReduceOp op_, Algorithm requested,
                                      bool async) {
    const char* op = "reduce";
    group.check_member(op);
    group.check_buffer(buffer, op);
    group.check_root(root, op);
    algorithms::check_supported(buffer.dtype, op_, group.rank());
    if (buffer.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::Reduce, buffer, &buffer, static_cast<int>(op_), root, Algorithm::Direct},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op_, root, stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_reduce(context, state, buffer.data, buffer.count, buffer.dtype, op_, root, stream);
          }, async);
    }
    Algorithm algorithm = pick(group, Collective::Reduce, buffer.bytes(), requested);
    return group.start_collective(Collective::Reduce, buffer.bytes(),
        signature(Collective::Reduce, algorithm, &buffer, static_cast<int>(op_), root, buffer.count), [=](const CollectiveContext& context) {
      if (algorithm == Algorithm::Ring) {
        algorithms::ring_reduce(context, buffer.data, buffer.count, buffer.dtype, op_, root, algorithms::ring_chunk_bytes());
      } else {
        algorithms::tree_reduce(context, buffer.data, buffer.count, buffer.dtype, op_, root);
      }
    }, async);
  }

  static std::shared_ptr<Work> all_gather_flat(ProcessGroup& group, Buffer output, Buffer input, Algorithm requested,
                                               bool async) {
    const char* op = "all_gather";
    group.check_member(op);
    check_pair(group, output, input, op);
    group.check_buffer(output, op);
    group.check_buffer(input, op);
    auto n = static_cast<std::size_t>(group.size());
    check_count(group, output.count >= input.count * n, op,
                "the output holds " + std::to_string(output.count) + " elements; it needs size() x input count = " +
                    std::to_string(input.count * n));
    std::size_t block = input.bytes();
    if (output.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::AllGather, output, &input},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_all_gather(context, state, output.data, input.data, block, stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_all_gather(context, state, output.data, input.data, block, stream,
                                          algorithms::ring_chunk_bytes());
          }, async);
    }
    pick(group, Collective::AllGather, input.bytes(), requested);
    return group.start_collective(Collective::AllGather, block,
        signature(Collective::AllGather, Algorithm::Ring, &input, -1, -1, input.count), [=](const CollectiveContext& context) {
      std::uint8_t* own = bytes_of(output) + static_cast<std::size_t>(context.rank) * block;
      if (own != input.data && block > 0) std::memmove(own, input.data, block);
      algorithms::ring_all_gather(context, output.data, block, algorithms::ring_chunk_bytes());
    }, async);
  }

  static std::shared_ptr<Work> all_gather_list(ProcessGroup& group, std::span<Buffer> outputs, Buffer input, bool async) {
    const char* op = "all_gather";
    group.check_member(op);
    group.check_buffer(input, op);
    check_count(group, outputs.size() == static_cast<std::size_t>(group.size()), op,
                "got " + std::to_string(outputs.size()) + " output buffers; pass one per rank (" +
                    std::to_string(group.size()) + ")");
    for (const Buffer& output : outputs) {
      check_pair(group, output, input, op);
      group.check_buffer(output, op);
      check_count(group, output.count >= input.count, op,
                  "an output buffer holds " + std::to_string(output.count) + " elements, fewer than the input's " +
                      std::to_string(input.count));
    }
    std::vector<Buffer> targets(outputs.begin(), outputs.end());
    std::size_t block = input.bytes();
    if (input.device.kind == Device::Kind::Cuda) {
      std::vector<void*> blocks;
      for (const Buffer& target : targets) blocks.push_back(target.data);
      int device = input.device.index;
      return on_device(group, {Collective::AllGather, input, &input},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            // Peers push into one allocation, gathered flat, then copied out.
            cuda::DeviceMemory flat(block * blocks.size(), device);
            auto* at = static_cast<std::uint8_t*>(flat.data());
            algorithms::ipc_all_gather(context, state, at, input.data, block, stream);
            for (std::size_t r = 0; r < blocks.size(); ++r) cuda::copy_async(blocks[r], at + r * block, block, device, stream);
            cuda::Stream::synchronize_handle(stream, device);  // before the flat buffer is freed
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_all_gather(context, state, blocks, input.data, block, stream,
                                          algorithms::ring_chunk_bytes());
          }, async);
    }
    return group.start_collective(Collective::AllGather, block,
        signature(Collective::AllGather, Algorithm::Ring, &input, -1, -1, input.count), [=](const CollectiveContext& context) {
      // Gathered flat, then copied out: the ring wants one buffer.
      std::uint8_t* flat = context.scratch->get(2, block * targets.size());
      if (block > 0) std::memcpy(flat + static_cast<std::size_t>(context.rank) * block, input.data, block);
      algorithms::ring_all_gather(context, flat, block, algorithms::ring_chunk_bytes());
      for (std::size_t r = 0; r < targets.size(); ++r) {
        if (block > 0) std::memcpy(targets[r].data, flat + r * block, block);
      }
    }, async);
  }

  static std::shared_ptr<Work> gather(ProcessGroup& group, Buffer input, std::span<Buffer> outputs, int root, bool async) {
    const char* op = "gather";
    group.check_member(op);
    group.check_buffer(input, op);
    group.check_root(root, op);
    std::vector<void*> blocks;
    if (group.rank() == root) {
      check_count(group, outputs.size() == static_cast<std::size_t>(group.size()), op,
                  "the root got " + std::to_string(outputs.size()) + " output buffers; pass one per rank (" +
                      std::to_string(group.size()) + ")");
      for (const Buffer& output : outputs) {
        check_pair(group, output, input, op);
        group.check_buffer(output, op);
        check_count(group, output.count >= input.count, op,
                    "an output buffer holds " + std::to_string(output.count) + " elements, fewer than the input's " +
                        std::to_string(input.count));
        blocks.push_back(output.data);
      }
    }
    if (input.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::Gather, input, &input, -1, root, Algorithm::Direct},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_gather(context, state, input.data, input.bytes(), blocks, root, stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_gather(context, state, input.data, input.bytes(), blocks, root, stream);
          }, async);
    }
    return group.start_collective(Collective::Gather, input.bytes(),
        signature(Collective::Gather, Algorithm::Direct, &input, -1, root, input.count), [=](const CollectiveContext& context) {
      algorithms::direct_gather(context, input.data, input.bytes(), blocks, root);
    }, async);
  }

  static std::shared_ptr<Work> scatter(ProcessGroup& group, Buffer output, std::span<const Buffer> inputs, int root,
                                       bool async) {
    const char* op = "scatter";
    group.check_member(op);
    group.check_buffer(output, op);
    group.check_root(root, op);
    std::vector<const void*> blocks;
    if (group.rank() == root) {
      check_count(group, inputs.size() == static_cast<std::size_t>(group.size()), op,
                  "the root got " + std::to_string(inputs.size()) + " input buffers; pass one per rank (" +
                      std::to_string(group.size()) + ")");
      for (const Buffer& input : inputs) {
        check_pair(group, output, input, op);
        group.check_buffer(input, op);
        check_count(group, input.count == output.count, op,
                    "an input buffer holds " + std::to_string(input.count) + " elements and the output " +
                        std::to_string(output.count) + "; they must be equal");
        blocks.push_back(input.data);
      }
    }
    if (output.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::Scatter, output, &output, -1, root, Algorithm::Direct},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_scatter(context, state, output.data, output.bytes(), blocks, root, stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_scatter(context, state, output.data, output.bytes(), blocks, root, stream);
          }, async);
    }
    return group.start_collective(Collective::Scatter, output.bytes(),
        signature(Collective::Scatter, Algorithm::Direct, &output, -1, root, output.count), [=](const CollectiveContext& context) {
      algorithms::direct_scatter(context, output.data, output.bytes(), blocks, root);
    }, async);
  }

  static std::shared_ptr<Work> reduce_scatter(ProcessGroup& group, Buffer output, Buffer input, ReduceOp op_,
                                              Algorithm requested, bool async) {
    const char* op = "reduce_scatter";
    group.check_member(op);
    check_pair(group, output, input, op);
    group.check_buffer(output, op);
    group.check_buffer(input, op);
    algorithms::check_supported(input.dtype, op_, group.rank());
    auto n = static_cast<std::size_t>(group.size());
    check_count(group, input.count >= output.count * n, op,
                "the input holds " + std::to_string(input.count) + " elements; it needs size() x output count = " +
                    std::to_string(output.count * n));
    if (output.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::ReduceScatter, output, &output, static_cast<int>(op_)},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
            algorithms::ipc_reduce_scatter(context, state, output.data, input.data, output.count, output.dtype, op_,
                                           stream);
          },
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_reduce_scatter(context, state, output.data, input.data, output.count, output.dtype, op_,
                                              stream, algorithms::ring_chunk_bytes());
          }, async);
    }
    pick(group, Collective::ReduceScatter, output.bytes(), requested);
    return group.start_collective(Collective::ReduceScatter, output.bytes(),
        signature(Collective::ReduceScatter, Algorithm::Ring, &output, static_cast<int>(op_), -1, output.count), [=](const CollectiveContext& context) {
      std::size_t block = output.bytes();
      std::uint8_t* own_in_input = bytes_of(input) + static_cast<std::size_t>(context.rank) * block;
      // The ring reduces in place, so an out-of-place call works on a copy of the input.
      std::uint8_t* data = bytes_of(input);
      if (own_in_input != output.data && block > 0) {
        data = context.scratch->get(2, block * n);
        std::memcpy(data, input.data, block * n);
      }
      algorithms::ring_reduce_scatter(context, data, output.count, input.dtype, op_, algorithms::ring_chunk_bytes());
      std::uint8_t* reduced = data + static_cast<std::size_t>(context.rank) * block;
      if (reduced != output.data && block > 0) std::memcpy(output.data, reduced, block);
    }, async);
  }

  static std::shared_ptr<Work> all_to_all(ProcessGroup& group, Buffer output, Buffer input, bool async) {
    const char* op = "all_to_all";
    group.check_member(op);
    check_pair(group, output, input, op);
    group.check_buffer(output, op);
    group.check_buffer(input, op);
    auto n = static_cast<std::size_t>(group.size());
    check_count(group, input.count % n == 0, op,
                "the input holds " + std::to_string(input.count) + " elements, not a multiple of the group size " +
                    std::to_string(n));
    check_count(group, output.count >= input.count, op,
                "the output holds " + std::to_string(output.count) + " elements, fewer than the input's " +
                    std::to_string(input.count));
    if (output.device.kind == Device::Kind::Cuda) {
      return on_device(group, {Collective::AllToAll, output, &input, -1, -1, Algorithm::Direct},
          [=](const CollectiveContext& context, algorithms::IpcState& state, void* stream) {
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
          [=](const CollectiveContext& context, algorithms::StagingState& state, void* stream) {
            algorithms::staged_all_to_all(context, state, output.data, input.data,
                                          input.bytes() / static_cast<std::size_t>(context.size), stream);
          }, async);
    }
    return group.start_collective(Collective::AllToAll, input.bytes() / n,
        signature(Collective::AllToAll, Algorithm::Direct, &input, -1, -1, input.count), [=](const CollectiveContext& context) {
      std::size_t block = input.bytes() / n;
      const void* source = input.data;
      if (input.data == output.data && block > 0) {  // in place: send from a copy
        std::uint8_t* copy = context.scratch->get(2, input.bytes());
        std::memcpy(copy, input.data, input.bytes());
        source = copy;
      }
      algorithms::direct_all_to_all(context, output.data, source, block);
    }, async);
  }

  static std::shared_ptr<Work> barrier(ProcessGroup& group, bool async) {
    group.check_member("barrier");
    Algorithm algorithm = pick(group, Collective::Barrier, 0, Algorithm::Auto);
    return group.start_collective(Collective::Barrier, 0, signature(Collective::Barrier, algorithm, nullptr, -1, -1, 0),
        [&group, algorithm](const CollectiveContext& context) {
      if (algorithm == Algorithm::SharedMemory) return algorithms::shared_memory_barrier(context, *group.arena_);
      algorithms::dissemination_barrier(context);
    }, async);
  }
};

void ProcessGroup::broadcast(Buffer buffer, int root, Algorithm algorithm) {
  CollectiveCalls::broadcast(*this, buffer, root, algorithm, false);
}
std::shared_ptr<Work> ProcessGroup::ibroadcast(Buffer buffer, int root, Algorithm algorithm) {
  return CollectiveCalls::broadcast(*this, buffer, root, algorithm, true);
}
void ProcessGroup::all_reduce(Buffer buffer, ReduceOp op, Algorithm algorithm) {
  CollectiveCalls::all_reduce(*this, buffer, op, algorithm, false);
}
std::shared_ptr<Work> ProcessGroup::iall_reduce(Buffer buffer, ReduceOp op, Algorithm algorithm) {
  return CollectiveCalls::all_reduce(*this, buffer, op, algorithm, true);
}
void ProcessGroup::reduce(Buffer buffer, int root, ReduceOp op, Algorithm algorithm) {
  CollectiveCalls::reduce(*this, buffer, root, op, algorithm, false);
}
std::shared_ptr<Work> ProcessGroup::ireduce(Buffer buffer, int root, ReduceOp op, Algorithm algorithm) {
  return CollectiveCalls::reduce(*this, buffer, root, op, algorithm, true);
}
void ProcessGroup::all_gather(std::span<Buffer> outputs, Buffer input) {
  CollectiveCalls::all_gather_list(*this, outputs, input, false);
}
std::shared_ptr<Work> ProcessGroup::iall_gather(std::span<Buffer> outputs, Buffer input) {
  return CollectiveCalls::all_gather_list(*this, outputs, input, true);
}
void ProcessGroup::all_gather(Buffer output, Buffer input, Algorithm algorithm) {
  CollectiveCalls::all_gather_flat(*this, output, input, algorithm, false);
}
std::shared_ptr<Work> ProcessGroup::iall_gather(Buffer output, Buffer input, Algorithm algorithm) {
  return CollectiveCalls::all_gather_flat(*this, output, input, algorithm, true);
}
void ProcessGroup::gather(Buffer input, std::span<Buffer> outputs, int root) {
  CollectiveCalls::gather(*this, input, outputs, root, false);
}
std::shared_ptr<Work> ProcessGroup::igather(Buffer input, std::span<Buffer> outputs, int root) {
  return CollectiveCalls::gather(*this, input, outputs, root, true);
}
void ProcessGroup::scatter(Buffer output, std::span<const Buffer> inputs, int root) {
  CollectiveCalls::scatter(*this, output, inputs, root, false);
}
std::shared_ptr<Work> ProcessGroup::iscatter(Buffer output, std::span<const Buffer> inputs, int root) {
  return CollectiveCalls::scatter(*this, output, inputs, root, true);
}
void ProcessGroup::reduce_scatter(Buffer output, Buffer input, ReduceOp op, Algorithm algorithm) {
  CollectiveCalls::reduce_scatter(*this, output, input, op, algorithm, false);
}
std::shared_ptr<Work> ProcessGroup::ireduce_scatter(Buffer output, Buffer input, ReduceOp op, Algorithm algorithm) {
  return CollectiveCalls::reduce_scatter(*this, output, input, op, algorithm, true);
}
void ProcessGroup::all_to_all(Buffer output, Buffer input) { CollectiveCalls::all_to_all(*this, output, input, false); }
std::shared_ptr<Work> ProcessGroup::iall_to_all(Buffer output, Buffer input) {
  return CollectiveCalls::all_to_all(*this, output, input, true);
}
void ProcessGroup::barrier() { CollectiveCalls::barrier(*this, false); }
std::shared_ptr<Work> ProcessGroup::ibarrier() { return CollectiveCalls::barrier(*this, true); }

}  // namespace comm
