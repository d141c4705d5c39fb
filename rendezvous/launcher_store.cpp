#include "rendezvous/launcher_store.hpp"

#include <filesystem>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"
#include "rendezvous/slurm_nodelist.hpp"

namespace comm {
namespace {

constexpr const char* kOp = "init_process_group";

// A launcher's job id as part of a file or key name (PMIx namespaces hold '@' and the like).
std::string name_safe(const std::string& text) {
  std::string safe = text;
  for (auto& character : safe) {
    if (!std::isalnum(static_cast<unsigned char>(character)) && character != '-' && character != '.') character = '_';
  }
  return safe;
}

std::optional<LauncherStore> from_slurm(const LaunchEnvironment& launch) {
  auto job_id = environment::get_integer("SLURM_JOB_ID");
  if (!job_id) job_id = environment::get_integer("SLURM_JOBID");
  std::string list_variable;
  std::optional<std::string> list;
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if ((list = environment::get(name))) {
      list_variable = name;
      break;
    }
  }
  if (!job_id || !list) return std::nullopt;
  // SLURM_STEP_ID is a number under srun (a batch script's own step has none of its own).
  long long step_id = 0;
  if (auto step = environment::get("SLURM_STEP_ID")) {
    try {
      step_id = std::stoll(*step);
    } catch (const std::exception&) {
      step_id = 0;
    }
    if (step_id < 0 || step_id > 1'000'000) step_id = 0;
  }
  auto hosts = expand_slurm_nodelist(*list);
  LauncherStore store;
  store.kind = LauncherStore::Kind::Tcp;
  store.host = hosts.front();
  store.port = slurm_store_port(*job_id, step_id);
  store.key_prefix = "slurm/" + std::to_string(*job_id) + "." + std::to_string(step_id);
  store.reason = "srun: the first host of " + list_variable + " (" + store.host + "), port 15000 + (SLURM_JOB_ID " +
                 std::to_string(*job_id) + " + step " + std::to_string(step_id) + ") mod 10000";
  // Rank 0 serves the store where every other rank will look for it; srun's usual block
  // distribution puts it there, an arbitrary one may not.
  auto node = environment::get("SLURMD_NODENAME");
  if (launch.rank == 0 && node && *node != store.host) {
    throw InvalidArgumentError("under srun, rank 0 runs on " + *node + ", not on " + store.host +
                                   ", the first host of " + list_variable +
                                   ", where the other ranks will look for the store; set MASTER_ADDR=" + *node +
                                   " and MASTER_PORT to a free port for every rank (or use srun's block "
                                   "distribution)",
                               ErrorContext{.rank = 0, .op = kOp});
  }
  return store;
}

std::optional<LauncherStore> from_open_mpi(const LaunchEnvironment& launch) {
  auto world_size = environment::get_integer("OMPI_COMM_WORLD_SIZE");
  auto local_size = environment::get_integer("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!world_size) return std::nullopt;
  if (!local_size || *local_size != *world_size) {
    auto hosts = environment::get("OMPI_MCA_orte_num_nodes");
    throw InvalidArgumentError(
        "this job runs under Open MPI's mpirun across " + (hosts ? *hosts + " hosts" : std::string("several hosts")) +
            " (OMPI_COMM_WORLD_SIZE=" + std::to_string(*world_size) + ", " +
            (local_size ? std::to_string(*local_size) : std::string("an unknown number")) +
            " on this host), and nothing says which host runs rank 0: set MASTER_ADDR to that host (the first of "
            "mpirun's --host or --hostfile list) and MASTER_PORT to a free port on it, and pass both to every rank: "
            "mpirun -x MASTER_ADDR=HOST -x MASTER_PORT=29500 ...",
        ErrorContext{.rank = launch.rank.value_or(-1), .op = kOp});
  }
  std::optional<std::string> job_id = environment::get("OMPI_MCA_ess_base_jobid");
  if (!job_id) job_id = environment::get("PMIX_NAMESPACE");
  // mpirun's session directory of this job: private to the user, removed by mpirun at the end.
  std::optional<std::string> directory;
  for (const char* name : {"OMPI_MCA_orte_jobfam_session_dir", "PMIX_SERVER_TMPDIR"}) {
    auto value = environment::get(name);
    std::error_code error;
    if (value && std::filesystem::is_directory(*value, error)) {
      directory = value;
      break;
    }
  }
  if (!job_id || !directory) {
    throw InvalidArgumentError(
        "this job runs under Open MPI's mpirun on one host, but its job id or session directory is not in the "
        "environment (OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE; OMPI_MCA_orte_jobfam_session_dir or "
        "PMIX_SERVER_TMPDIR): set MASTER_ADDR=127.0.0.1 and MASTER_PORT to a free port for every rank "
        "(mpirun -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ...)",
        ErrorContext{.rank = launch.rank.value_or(-1), .op = kOp});
  }
  LauncherStore store;
  store.kind = LauncherStore::Kind::File;
  store.path = *directory + "/libcomm-store-" + name_safe(*job_id);
  store.key_prefix = "mpirun/" + name_safe(*job_id);
  store.reason = "mpirun on one host: a file in the job's session directory (job " + *job_id + ")";
  return store;
}

}  // namespace

std::uint16_t slurm_store_port(long long job_id, long long step_id) {
  return static_cast<std::uint16_t>(15000 + (job_id % 10000 + step_id % 10000) % 10000);
}

std::optional<LauncherStore> store_from_launcher(const LaunchEnvironment& launch) {
  if (launch.rank_source == "SLURM_PROCID") return from_slurm(launch);
  if (launch.rank_source == "OMPI_COMM_WORLD_RANK") return from_open_mpi(launch);
  return std::nullopt;
}

}  // namespace comm
