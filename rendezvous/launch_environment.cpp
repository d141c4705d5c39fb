#include "rendezvous/launch_environment.hpp"

#include "libcomm/base/environment.hpp"

namespace comm {
namespace {

std::optional<int> first_of(std::initializer_list<const char*> names, std::string* source = nullptr) {
  auto found = environment::first_integer(names);
  if (!found) return std::nullopt;
  if (source != nullptr) *source = found->name;
  return static_cast<int>(found->value);
}

}  // namespace

LaunchEnvironment read_launch_environment() {
  LaunchEnvironment launch;
  launch.rank = first_of({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, &launch.rank_source);
  launch.world_size =
      first_of({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &launch.world_size_source);
  launch.local_rank = first_of({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  launch.local_size = first_of({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"});
  return launch;
}

}  // namespace comm
