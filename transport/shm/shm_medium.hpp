// Shared memory as a medium: rings between the ranks of one host (shm_stream.hpp), the pair's
// mesh connection kept beside them for wake-ups and to see the peer end.
#pragma once

#include "transport/medium.hpp"

namespace comm::transport {

MediumEntry shm_medium();

}  // namespace comm::transport
