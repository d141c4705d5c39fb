// Where the store of a job lives when its launcher knows and the user said nothing (no
// MASTER_ADDR, no MASTER_PORT): srun's job runs its store on the first host of the step, at a
// port derived from the job id; Open MPI's mpirun on one host keeps it in a file in the job's
// own session directory. Across hosts under mpirun nothing says where rank 0 runs: the error
// says what to set.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rendezvous/launch_environment.hpp"

namespace comm {

struct LauncherStore {
  enum class Kind { Tcp, File };
  Kind kind = Kind::Tcp;
  std::string host;        // Tcp
  std::uint16_t port = 0;  // Tcp
  std::string path;        // File
  std::string key_prefix;  // the launcher's job (and step): another job that finds the same store never meets ours
  std::string reason;      // for the log: which variables said so
};

// Nothing when no launcher this knows started the process. Throws InvalidArgumentError saying
// exactly what to set where the launcher cannot say (mpirun across hosts, a Slurm rank 0 that
// is not on the step's first host) or its variables are malformed.
std::optional<LauncherStore> store_from_launcher(const LaunchEnvironment& launch);

// The port a Slurm job's store uses: 15000 + (job id + step id) mod 10000, the range
// Lightning's Slurm support uses, distinct for the steps of one job.
std::uint16_t slurm_store_port(long long job_id, long long step_id);

}  // namespace comm
