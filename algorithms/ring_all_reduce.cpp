#include "ring_all_reduce.hpp"

#include <vector>

#include "reduce.hpp"

namespace comm::algorithms {

void ring_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op) {
  int n = context.size;
  if (n > 1 && count > 0) {
    std::size_t element = element_size(dtype);
    auto* bytes = static_cast<std::uint8_t*>(data);
    // Segment s covers [begin(s), begin(s + 1)): as equal as possible.
    auto begin = [&](int segment) { return count * static_cast<std::size_t>(segment) / static_cast<std::size_t>(n); };
    auto length = [&](int segment) { return begin(segment + 1) - begin(segment); };
    auto at = [&](int segment) { return bytes + begin(segment) * element; };
    auto wrap = [&](int index) { return ((index % n) + n) % n; };
    int next = wrap(context.rank + 1), previous = wrap(context.rank - 1);
    std::vector<std::uint8_t> incoming((count / static_cast<std::size_t>(n) + 1) * element);

    // Reduce-scatter: after step s, segment rank - s - 1 holds s + 2 contributions here.
    for (int step = 0; step < n - 1; ++step) {
      int send_segment = wrap(context.rank - step), receive_segment = wrap(context.rank - step - 1);
      auto receive = context.transport.irecv(previous, incoming.data(), length(receive_segment) * element, context.tag(step));
      auto send = context.transport.isend(next, at(send_segment), length(send_segment) * element, context.tag(step));
      context.wait(receive, previous, step);
      reduce(at(receive_segment), incoming.data(), length(receive_segment), dtype, op);
      context.wait(send, next, step);
    }
    // All-gather: each fully reduced segment travels around from its owner, rank + 1 - n.
    for (int step = 0; step < n - 1; ++step) {
      int send_segment = wrap(context.rank + 1 - step), receive_segment = wrap(context.rank - step);
      std::uint64_t tag = context.tag(static_cast<std::uint64_t>(n + step));
      auto receive = context.transport.irecv(previous, at(receive_segment), length(receive_segment) * element, tag);
      auto send = context.transport.isend(next, at(send_segment), length(send_segment) * element, tag);
      context.wait(receive, previous, static_cast<std::uint64_t>(n + step));
      context.wait(send, next, static_cast<std::uint64_t>(n + step));
    }
  }
  if (op == ReduceOp::Avg) divide(data, count, dtype, static_cast<std::size_t>(n));
}

}  // namespace comm::algorithms
