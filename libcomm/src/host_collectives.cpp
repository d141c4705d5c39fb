// The collectives on host buffers: the tuner's algorithm (or the caller's), run over the
// group's transport through start_collective. Arguments are checked already (collectives.cpp).
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/direct.hpp"
#include "algorithms/halving_doubling.hpp"
#include "algorithms/hierarchical.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/shared_memory.hpp"
#include "algorithms/small_message.hpp"
#include "algorithms/tree.hpp"
#include "algorithms/tuner.hpp"
#include "libcomm/src/collective_call.hpp"

namespace comm {

using algorithms::CollectiveContext;

namespace {

std::uint8_t* bytes_of(const Buffer& buffer) { return static_cast<std::uint8_t*>(buffer.data); }

}  // namespace

std::shared_ptr<Work> ProcessGroup::Impl::host_broadcast(Buffer buffer, int root, Algorithm requested, bool async) {
  algorithms::Choice choice = choose(Collective::Broadcast, buffer.bytes(), requested);
  Algorithm algorithm = choice.algorithm;
  std::size_t chunk = choice.chunk_bytes, link_chunk = choice.link_chunk_bytes;
  const algorithms::HostLayout* hosts = &host_layout_;
  return start_collective(
      CallShape{Collective::Broadcast, static_cast<int>(buffer.dtype), buffer.count, root}, buffer.bytes(),
      call_fingerprint(Collective::Broadcast, algorithm, &buffer, -1, root, buffer.count),
      [=](const CollectiveContext& context) {
        if (algorithm == Algorithm::Hierarchical) {
          algorithms::hierarchical_broadcast(context, *hosts, buffer.data, buffer.bytes(), root, chunk, link_chunk);
        } else if (algorithm == Algorithm::Ring) {
          algorithms::ring_broadcast(context, buffer.data, buffer.bytes(), root, chunk);
        } else {
          algorithms::tree_broadcast(context, buffer.data, buffer.bytes(), root);
        }
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_all_reduce(Buffer buffer, ReduceOp op, Algorithm requested, bool async) {
  algorithms::Choice choice = choose(Collective::AllReduce, buffer.bytes(), requested);
  Algorithm algorithm = choice.algorithm;
  transport::SharedArena* arena = arena_.get();
  const algorithms::HostLayout* hosts = &host_layout_;
  return start_collective(
      CallShape{Collective::AllReduce, static_cast<int>(buffer.dtype), buffer.count, -1}, buffer.bytes(),
      call_fingerprint(Collective::AllReduce, algorithm, &buffer, static_cast<int>(op), -1, buffer.count),
      [=](const CollectiveContext& context) {
        switch (algorithm) {
          case Algorithm::Tree:
            return algorithms::tree_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op);
          case Algorithm::RecursiveDoubling:
            return algorithms::recursive_doubling_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op);
          case Algorithm::SharedMemory:
            if (context.size == 1) return;  // nothing to combine (an average divides by one)
            return algorithms::shared_memory_all_reduce(context, *arena, buffer.data, buffer.count, buffer.dtype, op);
          case Algorithm::HalvingDoubling:
            return algorithms::halving_doubling_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op,
                                                           choice.chunk_bytes);
          case Algorithm::Hierarchical:
            return algorithms::hierarchical_all_reduce(context, *hosts, buffer.data, buffer.count, buffer.dtype, op,
                                                       choice.chunk_bytes, choice.link_chunk_bytes,
                                                       choice.across_hosts);
          default:
            return algorithms::ring_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op,
                                               choice.chunk_bytes);
        }
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_reduce(Buffer buffer, int root, ReduceOp op, Algorithm requested,
                                                      bool async) {
  algorithms::Choice choice = choose(Collective::Reduce, buffer.bytes(), requested);
  Algorithm algorithm = choice.algorithm;
  std::size_t chunk = choice.chunk_bytes, link_chunk = choice.link_chunk_bytes;
  const algorithms::HostLayout* hosts = &host_layout_;
  return start_collective(
      CallShape{Collective::Reduce, static_cast<int>(buffer.dtype), buffer.count, root}, buffer.bytes(),
      call_fingerprint(Collective::Reduce, algorithm, &buffer, static_cast<int>(op), root, buffer.count),
      [=](const CollectiveContext& context) {
        if (algorithm == Algorithm::Hierarchical) {
          algorithms::hierarchical_reduce(context, *hosts, buffer.data, buffer.count, buffer.dtype, op, root, chunk,
                                          link_chunk);
        } else if (algorithm == Algorithm::Ring) {
          algorithms::ring_reduce(context, buffer.data, buffer.count, buffer.dtype, op, root, chunk);
        } else {
          algorithms::tree_reduce(context, buffer.data, buffer.count, buffer.dtype, op, root);
        }
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_all_gather(Buffer output, Buffer input, Algorithm requested,
                                                          bool async) {
  algorithms::Choice choice = choose(Collective::AllGather, input.bytes(), requested);
  Algorithm algorithm = choice.algorithm;
  const algorithms::HostLayout* hosts = &host_layout_;
  std::size_t block = input.bytes();
  return start_collective(
      CallShape{Collective::AllGather, static_cast<int>(input.dtype), input.count, -1}, block,
      call_fingerprint(Collective::AllGather, algorithm, &input, -1, -1, input.count),
      [=](const CollectiveContext& context) {
        if (algorithm == Algorithm::Hierarchical) {
          return algorithms::hierarchical_all_gather(context, *hosts, output.data, input.data, block,
                                                     choice.chunk_bytes, choice.link_chunk_bytes);
        }
        std::uint8_t* own = bytes_of(output) + static_cast<std::size_t>(context.rank) * block;
        if (own != input.data && block > 0) std::memmove(own, input.data, block);
        algorithms::ring_all_gather(context, output.data, block, choice.chunk_bytes);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_all_gather(std::vector<Buffer> outputs, Buffer input, bool async) {
  std::size_t block = input.bytes();
  std::size_t chunk = choose(Collective::AllGather, block, Algorithm::Ring).chunk_bytes;
  return start_collective(
      CallShape{Collective::AllGather, static_cast<int>(input.dtype), input.count, -1}, block,
      call_fingerprint(Collective::AllGather, Algorithm::Ring, &input, -1, -1, input.count),
      [=, outputs = std::move(outputs)](const CollectiveContext& context) {
        // Gathered flat, then copied out: the ring wants one buffer.
        std::uint8_t* flat = context.scratch->get(2, block * outputs.size());
        if (block > 0) std::memcpy(flat + static_cast<std::size_t>(context.rank) * block, input.data, block);
        algorithms::ring_all_gather(context, flat, block, chunk);
        for (std::size_t r = 0; r < outputs.size(); ++r) {
          if (block > 0) std::memcpy(outputs[r].data, flat + r * block, block);
        }
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_gather(Buffer input, std::vector<void*> outputs, int root, bool async) {
  return start_collective(
      CallShape{Collective::Gather, static_cast<int>(input.dtype), input.count, root}, input.bytes(),
      call_fingerprint(Collective::Gather, Algorithm::Direct, &input, -1, root, input.count),
      [=, outputs = std::move(outputs)](const CollectiveContext& context) {
        algorithms::direct_gather(context, input.data, input.bytes(), outputs, root);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_scatter(Buffer output, std::vector<const void*> inputs, int root,
                                                       bool async) {
  return start_collective(
      CallShape{Collective::Scatter, static_cast<int>(output.dtype), output.count, root}, output.bytes(),
      call_fingerprint(Collective::Scatter, Algorithm::Direct, &output, -1, root, output.count),
      [=, inputs = std::move(inputs)](const CollectiveContext& context) {
        algorithms::direct_scatter(context, output.data, output.bytes(), inputs, root);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_reduce_scatter(Buffer output, Buffer input, ReduceOp op,
                                                              Algorithm requested, bool async) {
  algorithms::Choice choice = choose(Collective::ReduceScatter, output.bytes(), requested);
  Algorithm algorithm = choice.algorithm;
  const algorithms::HostLayout* hosts = &host_layout_;
  auto n = static_cast<std::size_t>(size());
  return start_collective(
      CallShape{Collective::ReduceScatter, static_cast<int>(output.dtype), output.count, -1}, output.bytes(),
      call_fingerprint(Collective::ReduceScatter, algorithm, &output, static_cast<int>(op), -1, output.count),
      [=](const CollectiveContext& context) {
        if (algorithm == Algorithm::Hierarchical) {
          return algorithms::hierarchical_reduce_scatter(context, *hosts, output.data, input.data, output.count,
                                                         input.dtype, op, choice.chunk_bytes, choice.link_chunk_bytes);
        }
        std::size_t block = output.bytes();
        std::uint8_t* own_in_input = bytes_of(input) + static_cast<std::size_t>(context.rank) * block;
        // The ring reduces in place, so an out-of-place call works on a copy of the input.
        std::uint8_t* data = bytes_of(input);
        if (own_in_input != output.data && block > 0) {
          data = context.scratch->get(2, block * n);
          std::memcpy(data, input.data, block * n);
        }
        algorithms::ring_reduce_scatter(context, data, output.count, input.dtype, op, choice.chunk_bytes);
        std::uint8_t* reduced = data + static_cast<std::size_t>(context.rank) * block;
        if (reduced != output.data && block > 0) std::memcpy(output.data, reduced, block);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_all_to_all(Buffer output, Buffer input, bool async) {
  auto n = static_cast<std::size_t>(size());
  return start_collective(
      CallShape{Collective::AllToAll, static_cast<int>(input.dtype), input.count, -1}, input.bytes() / n,
      call_fingerprint(Collective::AllToAll, Algorithm::Direct, &input, -1, -1, input.count),
      [=](const CollectiveContext& context) {
        std::size_t block = input.bytes() / n;
        const void* source = input.data;
        if (input.data == output.data && block > 0) {  // in place: send from a copy
          std::uint8_t* copy = context.scratch->get(2, input.bytes());
          std::memcpy(copy, input.data, input.bytes());
          source = copy;
        }
        algorithms::direct_all_to_all(context, output.data, source, block);
      },
      async);
}

std::shared_ptr<Work> ProcessGroup::Impl::host_barrier(bool async) {
  Algorithm algorithm = algorithm_for(Collective::Barrier, 0, Algorithm::Auto);
  transport::SharedArena* arena = arena_.get();
  return start_collective(
      CallShape{Collective::Barrier}, 0, call_fingerprint(Collective::Barrier, algorithm, nullptr, -1, -1, 0),
      [=](const CollectiveContext& context) {
        if (algorithm == Algorithm::SharedMemory) return algorithms::shared_memory_barrier(context, *arena);
        algorithms::dissemination_barrier(context);
      },
      async);
}

}  // namespace comm
