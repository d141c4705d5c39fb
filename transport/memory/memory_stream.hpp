// Memory as a medium: ranks that are threads of one process talk through in-process byte pipes
// (transport::ByteStream: move bytes, wake the peer, fail, and nothing else). The message
// layer runs over it unchanged (frames, matching, eager and rendezvous sends, fingerprints,
// goodbyes), which tests/test_algorithms_loopback.cpp shows by running every algorithm of the
// table over it, and tests/test_media.cpp through init_process_group (COMM_TRANSPORT=memory).
// Each direction is a bounded queue under a lock (so writers meet back-pressure), and each end
// has an eventfd its peer rings when it wrote or made room, which is what the progress thread
// sleeps on. It is the proof that a medium is one folder and one line in transport/media.cpp.
#pragma once

#include <memory>
#include <vector>

#include "transport/medium.hpp"

namespace comm::transport {

// streams[r][p]: rank r's end of its pipe to rank p (null for p == r), for MeshTransport::create.
// `capacity`: bytes a direction holds before its writer must wait. `read_lent`: how a receiver
// reads a lent buffer (lent_buffers.hpp; null: a plain copy), for tests of the single-copy path.
std::vector<std::vector<std::unique_ptr<ByteStream>>> memory_stream_mesh(int ranks, std::size_t capacity = 256 << 10,
                                                                         ReadLent read_lent = nullptr);

// Through init_process_group: every rank of the job in this process (else the set-up says which
// is not); the pipe of a pair is made by whichever end asks first.
MediumEntry memory_medium();

}  // namespace comm::transport
