// How a receive can combine what arrives with what its buffer already holds (buffer = buffer op
// message, element by element) instead of overwriting it: the one interface the algorithms hand
// down to the message layer for it (docs/design/transport.md, "Who calls whom"). The transport hands the bytes to the
// function as they come off the medium, straight from shared memory where it can, so a ring's
// reduce-scatter needs no scratch buffer and no second pass over it. Transports know nothing
// of arithmetic: the caller supplies the function (algorithms/reduce.hpp's, in practice).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/types.hpp"

namespace comm::transport {

// target[i] = target[i] op incoming[i] for i < count; both aligned to the element size.
using CombineFunction = void (*)(void* target, const void* incoming, std::size_t count, DType dtype, ReduceOp op);

struct Combiner {
  CombineFunction combine = nullptr;
  DType dtype = DType::UInt8;
  ReduceOp op = ReduceOp::Sum;
  std::size_t element = 1;  // bytes per element

  explicit operator bool() const { return combine != nullptr; }
  void operator()(void* target, const void* incoming, std::size_t count) const {
    combine(target, incoming, count, dtype, op);
  }
};

// target = target op run, `elements` of them; `run` need not be aligned to the element size
// (bytes that follow a message of odd length in a stream are not), `target` must be. Defined
// with the stream that reads such runs (message/stream_connection.cpp).
void combine_run(const Combiner& reduction, std::uint8_t* target, const std::uint8_t* run, std::size_t elements);

}  // namespace comm::transport
