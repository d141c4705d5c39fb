// The shared harness of the *_perf benchmarks: nccl-tests' flags and columns (docs: the bench
// output contract in docs/design), sizes swept from -b to -e by -f, warm-up and timed
// iterations, p50/p99, a correctness check per size, and --csv rows from rank 0.
//
// A benchmark describes itself with a few functions (BenchDescriptor) and calls run_bench().
// It runs under commrun, torchrun, mpirun or srun: the group comes from init_process_group().
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"

namespace comm::bench {

struct BenchOptions {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 256u << 20;
  double factor = 2.0;
  int iterations = -1;  // -1: chosen per size (more for small messages)
  int warmup = 5;
  bool check = true;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::string algorithm = "auto";
  bool csv = false;
  std::string mode{};  // --mode: run only the rows of this mode (empty: all)
  bool runs(std::string_view name) const { return mode.empty() || mode == name; }
};

// One row: what one (size, mode) measured. Times are per operation, in microseconds.
struct Measurement {
  std::string collective;
  std::string algorithm;
  bool in_place = false;
  std::size_t bytes = 0;
  std::vector<double> times_us;  // one per timed iteration, as seen by rank 0
  double bus_factor = 1.0;       // busbw = algbw * bus_factor
  double bytes_factor = 1.0;     // algbw = bytes * bytes_factor / time
  long long wrong = 0;
  std::string mode{};  // the table's mode column; empty: "in-place" or "out-place"
};

struct BenchContext {
  ProcessGroup& group;
  const BenchOptions& options;
  std::size_t bytes;
  std::size_t count;
  int iterations;
};

struct BenchDescriptor {
  std::string name;
  // Runs warm-up, timed iterations and the check for one size; returns its rows.
  std::function<std::vector<Measurement>(const BenchContext&)> run;
  // Smallest group that makes sense (2 for point to point).
  int min_ranks = 1;
};

// Parses argv (exits with a usage message on bad flags), initialises the group, sweeps the
// sizes and prints. Returns the process exit status: 1 if any check found wrong bytes.
int run_bench(int argc, char** argv, const BenchDescriptor& bench);

double percentile(std::vector<double> values, double fraction);

}  // namespace comm::bench
