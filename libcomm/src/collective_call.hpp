// The fingerprint of a collective call: what every rank must agree on (see
// libcomm/base/fingerprint.hpp), so that ranks that disagree get a mismatch error, not a hang.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"
#include "libcomm/base/fingerprint.hpp"

namespace comm {

inline std::uint64_t call_fingerprint(Collective collective, Algorithm algorithm, const Buffer* buffer, int op,
                                      int root, std::size_t count) {
  bool gpu = buffer != nullptr && buffer->device.kind == Device::Kind::Cuda;
  return detail::fingerprint(
      {static_cast<int>(collective), buffer ? static_cast<int>(buffer->dtype) : -1, op, algorithm, root, count, gpu});
}

}  // namespace comm
