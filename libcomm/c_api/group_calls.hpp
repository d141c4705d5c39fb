// comm_group_start/comm_group_end: per thread and nestable. Between the outermost start and end,
// inits and operations are queued; the end runs the inits at once (each on its own thread, since
// each waits for its peers), then issues every operation in order as libcomm's i-forms, so that
// sends and receives, to self too, and collectives of several communicators progress together;
// then it waits for all of them (device operations included: see operations.cpp).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "comm/comm.h"
#include "comm/comm.hpp"

namespace comm::c_api {

using Init = std::function<void()>;
// Issues an operation on the group (setting its stream first for device buffers).
using Issue = std::function<std::shared_ptr<Work>(ProcessGroup&)>;

// Threads inside a group right now: while none is, no call needs to look at its thread's group
// state (thread-local storage in a shared library costs a function call per look).
extern std::atomic<int> threads_in_groups;
bool thread_in_group();
inline bool in_group() { return threads_in_groups.load(std::memory_order_relaxed) > 0 && thread_in_group(); }
// Outside a group: runs `init` now.
void run_or_queue_init(comm_communicator* comm, Init init);
void queue_operation(comm_communicator* comm, Issue issue);

comm_result_t group_start();
comm_result_t group_end();

}  // namespace comm::c_api
