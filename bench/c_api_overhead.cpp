// c_api_overhead: what libcomm's C API (comm/comm.h) adds to a call, measured against the C++
// API side by side in one job: an 8-byte all_reduce (and a barrier) through each, in alternating
// rounds so that both see the same machine. Each rank makes a C++ group (env://) and a C
// communicator from an id that rank 0 makes and broadcasts through the C++ group; both run over
// the same transport kind. Rank 0 prints the median over rounds of each round's mean time per
// call, in microseconds.
//
//   commrun -n 2 build/bench/c_api_overhead [--rounds 30] [--calls 2000]
#include <comm/comm.h>

#include <algorithm>
#include <chrono>
#include <comm/comm.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

void check(comm_result_t result, const char* what) {
  if (result != COMM_SUCCESS) {
    std::fprintf(stderr, "%s: %s: %s\n", what, comm_get_error_string(result), comm_get_last_error(nullptr));
    std::exit(1);
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Mean microseconds per call of `calls` calls.
double time_calls(int calls, const std::function<void()>& call) {
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - started;
  return took.count() / calls;
}

}  // namespace

int main(int argc, char** argv) try {
  int rounds = 30, calls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
  }
  auto group = comm::init_process_group();
  comm_unique_id id{};
  if (group->rank() == 0) check(comm_get_unique_id(&id), "comm_get_unique_id");
  group->broadcast(comm::Buffer(&id, sizeof id, comm::DType::UInt8), 0);
  comm_t comm = nullptr;
  check(comm_init_rank(&comm, group->size(), id, group->rank()), "comm_init_rank");

  double value = 1.0;
  std::vector<double> cpp_all_reduce, c_all_reduce, cpp_barrier, c_barrier;
  auto cpp_reduce_once = [&] { group->all_reduce(comm::Buffer(&value, 1, comm::DType::Float64)); };
  auto c_reduce_once = [&] {
    check(comm_all_reduce(&value, &value, 1, COMM_FLOAT64, COMM_SUM, comm, nullptr), "all_reduce");
  };
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up and is dropped
    group->barrier();
    double a = time_calls(calls, cpp_reduce_once);
    check(comm_barrier(comm, nullptr), "barrier");
    double b = time_calls(calls, c_reduce_once);
    group->barrier();
    double c = time_calls(calls, [&] { group->barrier(); });
    double d = time_calls(calls, [&] { check(comm_barrier(comm, nullptr), "barrier"); });
    value = 1.0;  // keep the sums finite
    if (round == 0) continue;
    cpp_all_reduce.push_back(a);
    c_all_reduce.push_back(b);
    cpp_barrier.push_back(c);
    c_barrier.push_back(d);
  }
  if (group->rank() == 0) {
    std::printf("# %d ranks, %d rounds of %d calls; median of the rounds' mean time per call\n", group->size(), rounds,
                calls);
    std::printf("%-22s %10s %10s\n", "call", "C++ (us)", "C (us)");
    std::printf("%-22s %10.3f %10.3f\n", "all_reduce 8 B", median(cpp_all_reduce), median(c_all_reduce));
    std::printf("%-22s %10.3f %10.3f\n", "barrier", median(cpp_barrier), median(c_barrier));
  }
  check(comm_destroy(comm), "comm_destroy");
  return 0;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "%s\n", error.what());
  return 1;
}
