// c_api_overhead: what libcomm's C API (comm/comm.h), and the drop-in libnccl over it, add to a
// call, measured against the C++ API side by side in one job: an 8-byte all_reduce (and a
// barrier) through each, in rounds whose order rotates so that all see the same machine. Each
// rank makes a C++ group (env://), a C communicator and an NCCL one, each from an id that rank 0
// makes and broadcasts through the C++ group; all run over the same transport kind. Rank 0 prints
// the median over rounds of each round's mean time per call, in microseconds.
//
//   commrun -n 2 build/bench/c_api_overhead [--rounds 30] [--calls 2000]
#include <comm/comm.h>
#if COMM_BENCH_NCCL
#include <nccl.h>
#endif

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

  // One entry per API: its all_reduce and barrier, and the rounds' times.
  struct Api {
    const char* name;
    std::function<void()> all_reduce, barrier;  // barrier: empty where the API has none (NCCL)
    std::vector<double> all_reduce_times{}, barrier_times{};
  };
  double value = 1.0;
  std::vector<Api> apis;
  apis.push_back(
      {"C++", [&] { group->all_reduce(comm::Buffer(&value, 1, comm::DType::Float64)); }, [&] { group->barrier(); }});
  apis.push_back({"C", [&] { check(comm_all_reduce(&value, &value, 1, COMM_FLOAT64, COMM_SUM, comm, nullptr), "C"); },
                  [&] { check(comm_barrier(comm, nullptr), "comm_barrier"); }});
#if COMM_BENCH_NCCL
  ncclUniqueId nccl_id{};
  if (group->rank() == 0 && ncclGetUniqueId(&nccl_id) != ncclSuccess) return 1;
  group->broadcast(comm::Buffer(&nccl_id, sizeof nccl_id, comm::DType::UInt8), 0);
  ncclComm_t nccl = nullptr;
  if (ncclCommInitRank(&nccl, group->size(), nccl_id, group->rank()) != ncclSuccess) return 1;
  apis.push_back({"NCCL drop-in",
                  [&] {
                    if (ncclAllReduce(&value, &value, 1, ncclDouble, ncclSum, nccl, nullptr) != ncclSuccess) {
                      std::fprintf(stderr, "ncclAllReduce: %s\n", ncclGetLastError(nccl));
                      std::exit(1);
                    }
                  },
                  {}});
#endif
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up and is dropped
    for (std::size_t k = 0; k < apis.size(); ++k) {
      auto& api = apis[(k + static_cast<std::size_t>(round)) % apis.size()];  // rotating order
      group->barrier();
      double all_reduce = time_calls(calls, api.all_reduce);
      group->barrier();
      double barrier = api.barrier ? time_calls(calls, api.barrier) : 0;
      value = 1.0;  // keep the sums finite
      if (round == 0) continue;
      api.all_reduce_times.push_back(all_reduce);
      api.barrier_times.push_back(barrier);
    }
  }
  if (group->rank() == 0) {
    std::printf("# %d ranks, %d rounds of %d calls; median of the rounds' mean time per call (us)\n", group->size(),
                rounds, calls);
    std::printf("%-14s %16s %12s\n", "api", "all_reduce 8 B", "barrier");
    for (auto& api : apis) {
      std::printf("%-14s %16.3f", api.name, median(api.all_reduce_times));
      if (api.barrier) {
        std::printf(" %12.3f\n", median(api.barrier_times));
      } else {
        std::printf(" %12s\n", "-");
      }
    }
  }
#if COMM_BENCH_NCCL
  ncclCommDestroy(nccl);
#endif
  check(comm_destroy(comm), "comm_destroy");
  return 0;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "%s\n", error.what());
  return 1;
}
