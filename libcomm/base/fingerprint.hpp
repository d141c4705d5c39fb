// What a collective call was, in 64 bits: every message of a collective carries its call's
// fingerprint (transports check it on arrival), so ranks that called different things in the
// same slot of a group get an error saying what each called, instead of a hang or garbage.
// Layout, high to low: collective+1 (4 bits; 0 = not a collective), dtype+1 (4), op+1 (4),
// algorithm (3), root+1 (10; 1023 for roots >= 1022), GPU buffers (1), count (38, modulo 2^38).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm::detail {

struct CallSignature {
  int collective = -1;  // a Collective, or -1: not a collective
  int dtype = -1;       // DType, or -1 when the collective has none
  int op = -1;          // ReduceOp, or -1
  Algorithm algorithm = Algorithm::Auto;
  int root = -1;  // or -1
  std::size_t count = 0;
  bool gpu = false;  // the call's buffers are GPU memory (a different protocol from host buffers)
};

// Inline: every collective call computes one.
constexpr std::uint64_t fingerprint(const CallSignature& call) {
  constexpr int kCollectiveShift = 60, kDTypeShift = 56, kOpShift = 52, kAlgorithmShift = 49, kRootShift = 39,
                kGpuShift = 38;
  constexpr std::uint64_t kCountMask = (std::uint64_t{1} << 38) - 1;
  auto root = static_cast<std::uint64_t>(call.root + 1 < 1023 ? call.root + 1 : 1023);
  return static_cast<std::uint64_t>(call.collective + 1) << kCollectiveShift |
         static_cast<std::uint64_t>(call.dtype + 1) << kDTypeShift |
         static_cast<std::uint64_t>(call.op + 1) << kOpShift |
         static_cast<std::uint64_t>(call.algorithm) << kAlgorithmShift | root << kRootShift |
         static_cast<std::uint64_t>(call.gpu) << kGpuShift | (static_cast<std::uint64_t>(call.count) & kCountMask);
}
// "all_reduce(float32 x 1000, sum, ring)"; "a point-to-point message" for 0.
std::string describe_fingerprint(std::uint64_t fingerprint);

}  // namespace comm::detail
