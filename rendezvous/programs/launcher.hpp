// The supervisor behind commrun: starts the ranks of one node, forwards their output with a
// rank prefix and the signals commrun receives, and stops every rank when one fails.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace comm::launcher {

struct RankSpec {
  int rank = 0;
  std::map<std::string, std::string> environment;  // added to commrun's own
  int cpu = -1;                                    // pin the rank to this CPU; -1: leave it where the scheduler puts it
};

struct LaunchPlan {
  std::vector<std::string> command;  // program and arguments; the program is looked up in PATH
  std::vector<RankSpec> ranks;
  bool prefix_output = true;
  // After the first failure (or a forwarded SIGINT/SIGTERM): how long ranks get to exit after
  // SIGTERM before SIGKILL.
  std::chrono::milliseconds grace_period = std::chrono::seconds(3);
  // --on-failure continue: a rank that dies or fails is reported and the others go on (they may
  // shrink their groups without it, docs/recovery.md); the job's status is then that of the
  // ranks not killed by a signal.
  bool continue_on_failure = false;
  // --restart N: a rank that dies or fails is replaced by a new process, N times at most in
  // all (implies continue_on_failure). The replacement has the rank's environment plus
  // COMM_JOIN (the group it joins with init_process_group: it waits for the survivors' grow())
  // and COMM_REPLACEMENT (1 for the first replacement, 2 for the second, ...).
  int restarts = 0;
  std::string restart_group = "default_pg";
  // commrun --trace: before the ranks are stopped (a failure, a forwarded SIGINT or SIGTERM),
  // each is sent SIGUSR2 (libcomm writes its flight recorder) and given this long first.
  std::chrono::milliseconds dump_before_stop{0};
};

// Runs every rank to completion. Returns 0 when all exited 0, else the exit status of the
// first rank that failed (128 + signal number for a signal), as torchrun does; with
// continue_on_failure, the first non-zero status of a rank that exited (not killed). The signal
// mask of the calling thread must already block the forwarded signals (see run_blocking_signals).
int run(const LaunchPlan& plan);

// Blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGCHLD in the calling thread;
// call before starting any thread so that every thread inherits the mask and run() receives
// them through a signalfd.
void block_forwarded_signals();

}  // namespace comm::launcher
