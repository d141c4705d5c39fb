// Jobs under srun and mpirun with nothing to set (issue 19): Slurm's compressed host lists, the
// store a launcher's job finds without MASTER_ADDR/MASTER_PORT, and the errors where it cannot.
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <functional>
#include <thread>

#include "comm/comm.hpp"
#include "rendezvous/launcher_store.hpp"
#include "rendezvous/slurm_nodelist.hpp"
#include "tests/support/child_process.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using comm::testing::ChildProcess;

namespace {

using Hosts = std::vector<std::string>;

std::string helper() { return comm::testing::program_path("COMM_TEST_HELPER"); }

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Starts `count` helper processes ("init env://") with environment_of(rank); returns each output
// after it ended (REQUIREs that it did within a minute).
std::vector<std::pair<int, std::string>> run_processes(
    int count, const std::function<std::map<std::string, std::string>(int)>& environment_of) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int rank = 0; rank < count; ++rank) {
    auto environment = environment_of(rank);
    environment["COMM_LOG_LEVEL"] = "info";
    environment["COMM_TIMEOUT"] = "20";
    children.push_back(
        std::make_unique<ChildProcess>(std::vector<std::string>{helper(), "init", "env://"}, environment));
  }
  std::vector<std::pair<int, std::string>> results;
  for (auto& child : children) {
    auto status = child->wait_for(60s);
    REQUIRE(status.has_value());
    results.emplace_back(*status, child->output());
  }
  return results;
}

std::map<std::string, std::string> slurm_task(int rank, int tasks, const std::string& nodelist, long long job_id) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", std::to_string(tasks)},
          {"SLURM_LOCALID", std::to_string(rank)},
          {"SLURM_JOB_ID", std::to_string(job_id)},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_NODELIST", nodelist},
          {"MASTER_ADDR", ""},
          {"MASTER_PORT", ""}};
}

// A job id whose derived port is free now, so parallel tests do not collide.
long long free_slurm_job() {
  for (long long job = 4000000 + ::getpid() % 10000;; ++job) {
    auto port = comm::slurm_store_port(job, 0);
    try {
      comm::TcpStoreServer probe(port);  // every interface: the store binds this host's name
      return job;
    } catch (const comm::IoError&) {
    }
  }
}

}  // namespace

TEST_CASE("Slurm host lists expand as Slurm expands them", "[launcher][slurm]") {
  const std::vector<std::pair<std::string, Hosts>> table{
      {"node1", {"node1"}},
      {"node1,node2", {"node1", "node2"}},
      {"gpu[01-04,07]", {"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"}},
      {"tux[0-3],login1", {"tux0", "tux1", "tux2", "tux3", "login1"}},
      {"nid[00008-00010]", {"nid00008", "nid00009", "nid00010"}},
      {"n[9-11]", {"n9", "n10", "n11"}},
      {"n[09-11]", {"n09", "n10", "n11"}},
      {"compute-0-[1-2]", {"compute-0-1", "compute-0-2"}},
      {"rack[1-2]-node[01-02]", {"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}},
      {"a[1,3]b,c", {"a1b", "a3b", "c"}},
      {"cn[5]", {"cn5"}},
      {"node-[7,9],gpu[1-2]", {"node-7", "node-9", "gpu1", "gpu2"}},
      {"worker.example.org", {"worker.example.org"}},
  };
  for (const auto& [list, hosts] : table) {
    INFO(list);
    CHECK(comm::expand_slurm_nodelist(list) == hosts);
  }
}

TEST_CASE("malformed Slurm host lists are refused, saying what is wrong", "[launcher][slurm][bad-input]") {
  const std::vector<std::pair<std::string, std::string>> table{
      {"", "an empty host name"},        {"node[1-", "'[' without ']'"},  {"node1]", "']' without '['"},
      {"node[]", "empty brackets"},      {"node[3-1]", "runs backwards"}, {"node[a-b]", "not a number"},
      {"node1,,node2", "an empty host"}, {"node[1-2", "'[' without ']'"}, {"n[[1]]", "nested brackets"},
      {"node 1", "white space"},         {"n[0-99999999]", "too long"},
  };
  for (const auto& [list, problem] : table) {
    INFO(list);
    CHECK_THROWS_WITH(comm::expand_slurm_nodelist(list),
                      ContainsSubstring("'" + list + "'") && ContainsSubstring(problem));
  }
}

TEST_CASE("a Slurm job's port comes from its job and step ids", "[launcher][slurm]") {
  CHECK(comm::slurm_store_port(1234, 0) == 16234);
  CHECK(comm::slurm_store_port(98765432, 0) == 20432);  // the job id's last four digits, as Lightning's
  CHECK(comm::slurm_store_port(98765432, 1) == 20433);  // another step of the job: another port
  CHECK(comm::slurm_store_port(9999, 1) == 15000);
}

TEST_CASE("an srun-like environment starts a job without MASTER_ADDR or MASTER_PORT", "[launcher][slurm][process]") {
  long long job = free_slurm_job();
  // This host first, in a compressed list as Slurm writes it.
  std::string nodelist = this_host() + ",gpu[02-04,07]";
  auto results = run_processes(4, [&](int rank) { return slurm_task(rank, 4, nodelist, job); });
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank << ": " << results[rank].second);
    CHECK(results[rank].first == 0);
    CHECK_THAT(
        results[rank].second,
        ContainsSubstring("joined " + std::to_string(rank) + "/4") && ContainsSubstring("sum ok 10") &&
            ContainsSubstring("the store from srun: the first host of SLURM_JOB_NODELIST (" + this_host() + ")") &&
            ContainsSubstring(std::to_string(comm::slurm_store_port(job, 0))));
  }
}

TEST_CASE("under srun a MASTER_ADDR and MASTER_PORT the user set still win", "[launcher][slurm][process]") {
  std::string port = std::to_string(comm::testing::free_port());
  auto results = run_processes(2, [&](int rank) {
    auto environment = slurm_task(rank, 2, "nowhere[1-2]", free_slurm_job());
    environment["MASTER_ADDR"] = "127.0.0.1";
    environment["MASTER_PORT"] = port;
    return environment;
  });
  for (auto& [status, output] : results) {
    INFO(output);
    CHECK(status == 0);
    CHECK_THAT(output, ContainsSubstring("TcpStore at 127.0.0.1:" + port));
    CHECK_THAT(output, !ContainsSubstring("the store from srun"));
  }
}

TEST_CASE("launchers that cannot say where the store is get told what to set", "[launcher][bad-input][process]") {
  SECTION("srun's rank 0 on a host that is not the step's first") {
    auto results = run_processes(1, [&](int) {
      auto environment = slurm_task(0, 2, "gpu[01-02]", free_slurm_job());
      environment["SLURMD_NODENAME"] = "gpu02";
      return environment;
    });
    CHECK(results[0].first == 10);
    CHECK_THAT(results[0].second,
               ContainsSubstring("rank 0 runs on gpu02, not on gpu01") && ContainsSubstring("set MASTER_ADDR=gpu02"));
  }
  SECTION("a malformed SLURM_JOB_NODELIST") {
    auto results = run_processes(1, [&](int) { return slurm_task(0, 2, "gpu[01-", free_slurm_job()); });
    CHECK(results[0].first == 10);
    CHECK_THAT(results[0].second, ContainsSubstring("Slurm host list 'gpu[01-'"));
  }
  SECTION("mpirun across hosts") {
    auto started = std::chrono::steady_clock::now();
    auto results = run_processes(1, [&](int) {
      return std::map<std::string, std::string>{
          {"OMPI_COMM_WORLD_RANK", "3"},    {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
          {"OMPI_MCA_orte_num_nodes", "2"}, {"MASTER_ADDR", ""},           {"MASTER_PORT", ""}};
    });
    CHECK(results[0].first == 10);
    CHECK_THAT(results[0].second, ContainsSubstring("mpirun across 2 hosts") &&
                                      ContainsSubstring("mpirun -x MASTER_ADDR=HOST -x MASTER_PORT=29500"));
    CHECK(std::chrono::steady_clock::now() - started < 5s);
  }
  SECTION("mpirun on one host without its session directory") {
    auto results = run_processes(1, [&](int) {
      return std::map<std::string, std::string>{{"OMPI_COMM_WORLD_RANK", "0"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                {"MASTER_ADDR", ""},
                                                {"MASTER_PORT", ""}};
    });
    CHECK(results[0].first == 10);
    CHECK_THAT(results[0].second, ContainsSubstring("session directory") && ContainsSubstring("MASTER_ADDR=127.0.0.1"));
  }
}
