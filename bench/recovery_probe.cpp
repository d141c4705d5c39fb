// recovery_probe: one rank of a job that loses a rank and goes on (bench/recovery.py). Every rank
// all_reduces in a loop; the victim (argument) kills itself with SIGKILL after a while, having
// printed the moment; the survivors catch the failure, shrink, run one all_reduce on the new
// group (checked) and print when the failure reached them and when the new group was ready.
//   commrun --on-failure continue -n 4 build/bench/recovery_probe 2
//   commrun -n 3 build/bench/recovery_probe none     (a fresh job's start, for comparison)
//   commrun --restart 1 -n 4 build/bench/recovery_probe 2 grow
//       (the survivors then grow back by one: the replacement commrun starts joins; each prints
//       when the grown group was ready)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <comm/comm.hpp>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) try {
  std::string victim_text = argc > 1 ? argv[1] : "none";
  bool grow_back = argc > 2 && std::string(argv[2]) == "grow";
  auto group = comm::init_process_group();
  int rank = group->rank();
  std::vector<float> data(256, 1.0f);
  if (std::getenv("COMM_JOIN") != nullptr) {  // the replacement: init returned the grown group
    std::vector<float> one{1.0f};
    group->all_reduce(one, comm::ReduceOp::Sum);
    std::printf("probe joined rank=%d grown_at=%lld size=%d correct=%d\n", rank, now_ns(), group->size(),
                one[0] == static_cast<float>(group->size()) ? 1 : 0);
    return 0;
  }
  if (victim_text == "none") {
    group->all_reduce(data, comm::ReduceOp::Sum);
    std::printf("probe rank=%d started\n", rank);
    return data[0] == static_cast<float>(group->size()) ? 0 : 1;
  }
  int victim = std::atoi(victim_text.c_str());
  // The victim dies somewhere in its first 20-80 ms of all_reduces: during a call, between calls.
  std::mt19937 random(static_cast<unsigned>(now_ns()));
  auto die_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(20 + random() % 60);
  long long failed_at = 0;
  try {
    for (int round = 0; round < 1000000; ++round) {
      if (rank == victim && std::chrono::steady_clock::now() >= die_at) {
        std::printf("probe rank=%d killed_at=%lld\n", rank, now_ns());
        std::fflush(stdout);
        ::kill(::getpid(), SIGKILL);
      }
      group->all_reduce(data, comm::ReduceOp::Max);
    }
    std::printf("probe rank=%d no failure\n", rank);
    return 1;
  } catch (const comm::Error&) {
    failed_at = now_ns();
  }
  auto shrunk = group->shrink();
  long long ready_at = now_ns();
  std::vector<float> one{1.0f};
  shrunk->all_reduce(one, comm::ReduceOp::Sum);
  bool correct = one[0] == static_cast<float>(shrunk->size());
  std::printf("probe rank=%d failed_at=%lld ready_at=%lld size=%d correct=%d\n", rank, failed_at, ready_at,
              shrunk->size(), correct ? 1 : 0);
  if (grow_back) {
    auto grown = shrunk->grow(1);
    std::vector<float> again{1.0f};
    grown->all_reduce(again, comm::ReduceOp::Sum);
    std::printf("probe rank=%d grown_at=%lld size=%d correct=%d\n", rank, now_ns(), grown->size(),
                again[0] == static_cast<float>(grown->size()) ? 1 : 0);
  }
  return correct ? 0 : 1;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "recovery_probe: %s\n", error.what());
  return 1;
}
