// Named loggers per subsystem (comm.rdzv, comm.transport, comm.algo, comm.cuda, comm.launcher,
// comm.group), all writing to stderr with a "[rank r/n]" prefix. The level comes from COMM_LOG_LEVEL
// (trace, debug, info, warn, error, off; default warn).
//
// Only .cpp files include this header: spdlog is heavy to compile and stays out of the API.
#pragma once

#include <spdlog/spdlog.h>

namespace comm::log {

enum class Subsystem { Rendezvous, Transport, Algorithms, Cuda, Launcher, Group };

// The logger of a subsystem; created on first use, thread-safe.
spdlog::logger& get(Subsystem subsystem);

// The rank shown in the prefix of messages logged from the calling thread. Ranks run as threads
// of one process in tests, so the label is per thread, falling back to the last rank set in the
// process for threads libcomm starts itself (e.g. the store server's I/O thread).
void set_rank(int rank, int world_size);

}  // namespace comm::log
