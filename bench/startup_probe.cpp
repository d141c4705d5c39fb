// startup_probe: what one rank of a job costs to start. It joins the job, runs one all_reduce
// (checked against the sum it must give), and prints one line: its init and first-collective
// times, and the sockets and threads it holds at that point. bench/scale_startup.py runs it at
// 8-128 ranks beside an MPI program doing the same (bench/peers/mpi_startup.c).
//   commrun -n 16 build/bench/startup_probe
#include <chrono>
#include <comm/comm.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "proc_self.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() try {
  auto start = std::chrono::steady_clock::now();
  auto group = comm::init_process_group();
  double init_s = seconds_since(start);
  int rank = group->rank(), size = group->size();
  std::vector<double> value{static_cast<double>(rank + 1)};
  group->all_reduce(value, comm::ReduceOp::Sum);
  double first_s = seconds_since(start);
  double expected = static_cast<double>(size) * (size + 1) / 2;
  // Counted before the barrier: what the job holds once its first collective has run.
  int sockets = bench::count_sockets(), threads = bench::count_threads();
  group->barrier();
  std::printf("probe rank=%d size=%d init_s=%.4f first_collective_s=%.4f sockets=%d threads=%d correct=%d\n", rank,
              size, init_s, first_s, sockets, threads, value[0] == expected ? 1 : 0);
  return value[0] == expected ? 0 : 1;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "startup_probe: %s\n", error.what());
  return 1;
}
