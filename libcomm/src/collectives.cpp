// The collectives of ProcessGroup: argument checks on the calling rank, a sequence number,
// then the algorithm.
#include "check.hpp"
#include "comm/process_group.hpp"
#include "reduce.hpp"
#include "ring_all_reduce.hpp"

namespace comm {

void ProcessGroup::all_reduce(Buffer buffer, ReduceOp op) {
  check_buffer(buffer, "all_reduce");
  algorithms::check_supported(buffer.dtype, op, rank());
  algorithms::CollectiveContext context{*transport_, rank(), size(), collective_sequence_++, timeout_, "all_reduce"};
  algorithms::ring_all_reduce(context, buffer.data, buffer.count, buffer.dtype, op);
}

}  // namespace comm
