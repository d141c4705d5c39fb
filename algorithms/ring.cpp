#include "algorithms/ring.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/chunking.hpp"
#include "algorithms/reduce.hpp"

namespace comm::algorithms {
namespace {

// Steps [first, last) of the ring over `data` (size segments, segment p = elements
// [count*p/size, count*(p+1)/size)). At step s rank r sends segment r-s-1... see ring.hpp.
// Steps below size-1 reduce what arrives into the segment (as it arrives, where the transport
// can; else through a scratch slot per chunk); the others copy it in place.
void ring_pipeline(const CollectiveContext& context, std::uint8_t* data, std::size_t count, DType dtype, ReduceOp op,
                   int first, int last, std::size_t chunk_bytes) {
  int n = context.size;
  if (n == 1 || first >= last) return;
  RingLayout ring(context, count, element_size(dtype), chunk_bytes, static_cast<std::size_t>(last - first));
  std::size_t chunks = ring.chunks;
  int next = context.wrap(context.rank + 1), previous = context.wrap(context.rank - 1);
  // Whether the transport reduces on arrival; where it cannot, two scratch slots per chunk, one
  // for even steps and one for odd. It can stop being able to mid-call (the predecessor finished
  // its part and closed its connection, leaving its last messages behind): what was posted to
  // reduce on arrival then still does, so each slot remembers how its receive was posted.
  // (Deciding by the latest answer instead combined already-reduced chunks once more with
  // scratch garbage: a wrong result on the last call before a group's end.)
  bool transport_reduces = true;
  std::vector<std::uint8_t> reduced_on_arrival(2 * chunks, 0);
  std::uint8_t* scratch = nullptr;
  // Each chunk's receive is posted two steps ahead, so that a predecessor running ahead finds it
  // posted rather than leaving its chunk to be buffered and copied again (over TCP at 64 KiB
  // chunks, 40% of what a rank of a three-host ring received had arrived unexpected; 11% with
  // this). The regions this lets arrive early are free: the data of step s+2 can reach this rank
  // only after the chain round the ring took what this rank sent n-1 steps earlier from the same
  // region.
  std::vector<Transfer> receives(2 * chunks);
  TransferSet sends;

  auto tag_step = [&](int step, std::size_t chunk) { return ring.tag(step - first, chunk); };
  auto slot = [&](int step, std::size_t chunk) { return static_cast<std::size_t>(step & 1) * chunks + chunk; };
  auto post_receive = [&](int step, std::size_t chunk) {
    auto [receive_offset, receive_bytes] = ring.chunk_of(ring.receive_segment(step), chunk);
    Transfer& receive = receives[slot(step, chunk)];
    if (step >= n - 1) {
      receive = context.recv(previous, data + receive_offset, receive_bytes, tag_step(step, chunk));
      return;
    }
    if (transport_reduces) {
      receive = context.recv_reduce(previous, data + receive_offset, receive_bytes, dtype, op, tag_step(step, chunk));
      transport_reduces = receive != nullptr;
    }
    reduced_on_arrival[slot(step, chunk)] = transport_reduces;
    if (!transport_reduces) {
      if (scratch == nullptr) scratch = context.scratch->get(0, 2 * ring.slot_bytes * chunks);
      receive =
          context.recv(previous, scratch + slot(step, chunk) * ring.slot_bytes, receive_bytes, tag_step(step, chunk));
    }
  };
  auto post_send = [&](int step, std::size_t chunk) {
    auto [send_offset, send_bytes] = ring.chunk_of(ring.send_segment(step), chunk);
    sends.add(context.send(next, data + send_offset, send_bytes, tag_step(step, chunk)), next, tag_step(step, chunk));
  };

  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    post_receive(first, chunk);
    if (first + 1 < last) post_receive(first + 1, chunk);
    post_send(first, chunk);
  }
  for (int step = first; step < last; ++step) {
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
      context.wait(receives[slot(step, chunk)], previous, tag_step(step, chunk));
      if (step < n - 1) {
        auto [offset, bytes] = ring.chunk_of(ring.receive_segment(step), chunk);
        std::size_t elements = bytes / ring.element;
        if (!reduced_on_arrival[slot(step, chunk)]) {
          reduce(data + offset, scratch + slot(step, chunk) * ring.slot_bytes, elements, dtype, op);
        }
        // The last reduction of a segment happens at its owner: finish an average there, once,
        // so that every rank receives the same divided bytes.
        if (step == n - 2 && op == ReduceOp::Avg) divide(data + offset, elements, dtype, static_cast<std::size_t>(n));
      }
      // What just arrived is what this rank sends next (send_segment(s+1) == receive_segment(s)),
      // and this chunk's slot is free for step s+2.
      if (step + 1 < last) post_send(step + 1, chunk);
      if (step + 2 < last) post_receive(step + 2, chunk);
    }
  }
  sends.wait_all(context);
}

}  // namespace

void ring_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op,
                     std::size_t chunk_bytes) {
  // A large buffer goes round the ring in rounds of at most kRingRoundSegmentBytes per segment, one
  // after the other: the scratch a round needs (one segment, over TCP) stays bounded and warm in
  // cache instead of being half the buffer. Rounds reuse the call's tags: each round's messages
  // from a peer arrive, and match, after the previous round's.
  std::size_t element = element_size(dtype);
  std::size_t segment_elements = std::max<std::size_t>(1, std::max(kRingRoundSegmentBytes, chunk_bytes) / element);
  std::size_t per_round = segment_elements * static_cast<std::size_t>(context.size);
  auto* bytes = static_cast<std::uint8_t*>(data);
  std::size_t first = 0;
  do {  // at least once: an empty call still meets the others
    std::size_t elements = std::min(per_round, count - first);
    ring_pipeline(context, bytes + first * element, elements, dtype, op, 0, 2 * context.size - 2, chunk_bytes);
    first += elements;
  } while (first < count);
}

void ring_reduce_scatter(const CollectiveContext& context, void* data, std::size_t block_count, DType dtype,
                         ReduceOp op, std::size_t chunk_bytes) {
  auto n = static_cast<std::size_t>(context.size);
  ring_pipeline(context, static_cast<std::uint8_t*>(data), block_count * n, dtype, op, 0, context.size - 1,
                chunk_bytes);
}

void ring_all_gather(const CollectiveContext& context, void* data, std::size_t block_bytes, std::size_t chunk_bytes) {
  auto n = static_cast<std::size_t>(context.size);
  ring_pipeline(context, static_cast<std::uint8_t*>(data), block_bytes * n, DType::UInt8, ReduceOp::Sum,
                context.size - 1, 2 * context.size - 2, chunk_bytes);
}

void ring_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root,
                    std::size_t chunk_bytes) {
  int n = context.size;
  if (n == 1) return;
  int position = context.wrap(context.rank - root);  // 0 at the root
  int next = position + 1 < n ? context.wrap(context.rank + 1) : -1;
  int previous = position > 0 ? context.wrap(context.rank - 1) : -1;
  Chunking cut{bytes, chunks_for(bytes, chunk_bytes, 1, context.step_space)};
  auto* at = static_cast<std::uint8_t*>(data);
  std::vector<Transfer> receives(cut.chunks);
  TransferSet sends;
  if (previous >= 0) {
    for (std::size_t chunk = 0; chunk < cut.chunks; ++chunk) {
      receives[chunk] = context.recv(previous, at + cut.begin(chunk), cut.length(chunk), chunk);
    }
  }
  for (std::size_t chunk = 0; chunk < cut.chunks; ++chunk) {
    if (previous >= 0) context.wait(receives[chunk], previous, chunk);
    if (next >= 0) sends.add(context.send(next, at + cut.begin(chunk), cut.length(chunk), chunk), next, chunk);
  }
  sends.wait_all(context);
}

void ring_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op, int root,
                 std::size_t chunk_bytes) {
  int n = context.size;
  std::size_t element = element_size(dtype);
  if (n > 1 && count > 0) {
    // The chain runs from position n-1 down to the root at position 0.
    int position = context.wrap(context.rank - root);
    int towards_root = position > 0 ? context.wrap(context.rank - 1) : -1;
    int from_tail = position + 1 < n ? context.wrap(context.rank + 1) : -1;
    Chunking cut{count, chunks_for(count * element, chunk_bytes, 1, context.step_space)};
    auto* input = static_cast<std::uint8_t*>(data);
    // The root accumulates into its buffer; the others add their input to the partial result in
    // the receive buffer and forward it from there, so their input stays as it was, uncopied.
    std::uint8_t* incoming = from_tail >= 0 ? context.scratch->get(0, count * element) : nullptr;
    std::vector<Transfer> receives(cut.chunks);
    TransferSet sends;
    if (from_tail >= 0) {
      for (std::size_t chunk = 0; chunk < cut.chunks; ++chunk) {
        receives[chunk] =
            context.recv(from_tail, incoming + cut.begin(chunk) * element, cut.length(chunk) * element, chunk);
      }
    }
    for (std::size_t chunk = 0; chunk < cut.chunks; ++chunk) {
      std::size_t offset = cut.begin(chunk) * element, bytes = cut.length(chunk) * element;
      const std::uint8_t* outgoing = input + offset;
      if (from_tail >= 0) {
        context.wait(receives[chunk], from_tail, chunk);
        if (position == 0) {
          reduce(input + offset, incoming + offset, cut.length(chunk), dtype, op);
        } else {
          reduce(incoming + offset, input + offset, cut.length(chunk), dtype, op);
          outgoing = incoming + offset;
        }
      }
      if (towards_root >= 0) sends.add(context.send(towards_root, outgoing, bytes, chunk), towards_root, chunk);
    }
    sends.wait_all(context);
  }
  if (op == ReduceOp::Avg && context.rank == root) divide(data, count, dtype, static_cast<std::size_t>(n));
}

}  // namespace comm::algorithms
