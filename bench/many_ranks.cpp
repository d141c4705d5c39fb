// many_ranks: THREADS ranks of a job as threads of this process, for start-up at thousands of
// ranks on one machine (bench/many_ranks.py starts a few of these). Each thread joins through
// tcp://127.0.0.1:PORT (rank 0 serves the store) over TCP, the process counts its sockets once
// all its ranks have joined (before any collective), then every rank runs one all_reduce
// (checked). One line: the slowest join, the first collective, sockets per rank.
//   many_ranks PORT WORLD_SIZE FIRST_RANK THREADS
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <comm/comm.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "proc_self.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: many_ranks PORT WORLD_SIZE FIRST_RANK THREADS\n");
    return 2;
  }
  std::string url = std::string("tcp://127.0.0.1:") + argv[1];
  int world = std::atoi(argv[2]), first = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  auto start = std::chrono::steady_clock::now();
  std::vector<double> joined(threads), collective(threads);
  std::atomic<int> wrong{0}, failed{0};
  int sockets = 0;
  std::barrier all_joined(threads, [&]() noexcept { sockets = bench::count_sockets(); });
  std::vector<std::thread> ranks;
  for (int t = 0; t < threads; ++t) {
    ranks.emplace_back([&, t] {
      std::shared_ptr<comm::ProcessGroup> group;
      try {
        group =
            comm::init_process_group({.init_method = url, .rank = first + t, .world_size = world, .transport = "tcp"});
      } catch (const comm::Error& error) {
        std::fprintf(stderr, "rank %d: %s\n", first + t, error.what());
        ++failed;
      }
      joined[t] = seconds_since(start);
      all_joined.arrive_and_wait();
      if (!group) return;
      try {
        std::vector<double> value{static_cast<double>(first + t + 1)};
        group->all_reduce(value, comm::ReduceOp::Sum);
        if (value[0] != static_cast<double>(world) * (world + 1) / 2) ++wrong;
        collective[t] = seconds_since(start);
        group->barrier();
      } catch (const comm::Error& error) {
        std::fprintf(stderr, "rank %d: %s\n", first + t, error.what());
        ++failed;
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  std::printf("many_ranks first=%d threads=%d joined_s=%.3f first_collective_s=%.3f sockets=%d wrong=%d failed=%d\n",
              first, threads, *std::max_element(joined.begin(), joined.end()),
              *std::max_element(collective.begin(), collective.end()), sockets, wrong.load(), failed.load());
  return wrong == 0 && failed == 0 ? 0 : 1;
}
