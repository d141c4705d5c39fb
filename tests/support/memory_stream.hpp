// A second medium under the real message protocol: an in-process byte pipe that implements the
// medium interface (transport::ByteStream: move bytes, wake the peer, fail) and nothing else.
// MeshTransport runs over it unchanged (frames, matching, eager and rendezvous sends,
// fingerprints, goodbyes), which is what tests/test_algorithms_medium.cpp shows by running
// every algorithm of the table over it. Each direction is a bounded queue under a lock (so
// writers meet back-pressure), and each end has an eventfd its peer rings when it wrote or made
// room, which is what the progress thread sleeps on.
#pragma once

#include <memory>
#include <vector>

#include "transport/message/stream_connection.hpp"

namespace comm::testing {

// streams[r][p]: rank r's end of its pipe to rank p (null for p == r), for MeshTransport::create.
// `capacity`: bytes a direction holds before its writer must wait.
std::vector<std::vector<std::unique_ptr<transport::ByteStream>>> memory_stream_mesh(int ranks,
                                                                                    std::size_t capacity = 256 << 10);

}  // namespace comm::testing
