// What a launcher told this process about its place in the job: torchrun and commrun set
// RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE, mpirun OMPI_COMM_WORLD_*, srun SLURM_*.
#pragma once

#include <optional>
#include <string>

namespace comm {

struct LaunchEnvironment {
  std::optional<int> rank, world_size, local_rank, local_size;
  std::string rank_source, world_size_source;  // the variable each came from, for messages
};

// Throws InvalidArgumentError when a variable is set but not an integer.
LaunchEnvironment read_launch_environment();

// The environment variables commrun sets for the rank it starts.
inline constexpr const char* kStoreIsExternalVariable = "COMM_STORE_EXTERNAL";

}  // namespace comm
