// Opening a group's transport: the TCP mesh first (every pair gets a socket), then the media
// (media.hpp): for peers on the same host, shared-memory rings that carry the data while the
// socket only wakes the peer and reports its death; TCP for the others.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "transport/job_failure.hpp"
#include "transport/media.hpp"
#include "transport/tcp/tcp_mesh.hpp"
#include "transport/transport.hpp"

namespace comm::transport {

// `chosen`: the medium asked for, null for the automatic choice (media.hpp's
// parse_medium_choice). `job_failure`: how the set-up learns of the job's failure and tells its
// own (job_failure.hpp).
std::shared_ptr<Transport> connect_transport(Store& store, const MeshOptions& options, const MediumEntry* chosen,
                                             const JobFailure& job_failure = {});

// What makes two ranks "on the same host": the host name and the network namespace, so that
// namespaces standing in for hosts on one machine are told apart. COMM_HOST_ID overrides.
std::string host_identity();

}  // namespace comm::transport
