// What comm-recovery-worker's files share: how a rank joins the job the test hosts, how it
// prints, and the modes that live in recovery_probes.cpp.
#pragma once

#include <memory>
#include <string>

#include "comm/comm.hpp"

namespace recovery_worker {

// RANK: this rank in the job as started.
int job_rank();
// Prints "rank R: LINE" and flushes (the test reads the output as the process runs).
void say(const std::string& line);
// Through the store the test hosts at MASTER_ADDR:MASTER_PORT; a newcomer joins the running group.
std::shared_ptr<comm::ProcessGroup> join(bool newcomer = false);

int run_after_abort();
int run_frozen_shrink();
int run_agree(const std::string& exclude_text, const std::string& action, int grow_count);
int run_agree_join(const std::string& action);

}  // namespace recovery_worker
