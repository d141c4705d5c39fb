// comm-trace-worker: the rank program of the flight recorder's tests (tests/trace/check_trace.py).
// Each rank makes a known series of calls and writes its own list of them to
// DIR/calls_rank<R>.json (what it called, in order: the checker compares the dumps with it).
//   calls DIR   every call completes; then comm::dump_trace(DIR) (the dump the checker reads),
//               and SIGUSR2 to itself: the recorder's own thread dumps into $TMPDIR
//   skip DIR    the last rank never calls the final all_reduce (it sleeps 8 s in user code and
//               returns): the others wait in it until COMM_TIMEOUT; with COMM_TRACE_DIR=DIR the
//               ranks dump on the hang verdict, on the timeout's error and at exit
//   straggler DIR  40 steps of "compute" (a 2 ms sleep; rank 2 sleeps 10 times as long) and an
//               all_reduce of 64 KiB, then a barrier
//   kill DIR    20 such steps (no straggler); rank 2 SIGKILLs itself before step 10; the others'
//               all_reduce fails, they shrink the world without it and finish on the new group
//               (run under commrun --on-failure continue)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.hpp"

namespace {

struct Called {
  std::string op;
  std::string group;
  long long count = -1;  // -1: no buffer
  std::string dtype;     // "" : no buffer
  int peer = -1;         // a root, or a transfer's peer (group ranks)
};

class CallList {
 public:
  void add(Called called) { calls_.push_back(std::move(called)); }
  void write(const std::string& path) const {
    std::ofstream out(path);
    out << "[\n";
    for (std::size_t i = 0; i < calls_.size(); ++i) {
      const Called& c = calls_[i];
      out << "  {\"op\": \"" << c.op << "\", \"group\": \"" << c.group << "\", \"count\": " << c.count
          << ", \"dtype\": \"" << c.dtype << "\", \"peer\": " << c.peer << "}" << (i + 1 < calls_.size() ? ",\n" : "\n");
    }
    out << "]\n";
  }

 private:
  std::vector<Called> calls_;
};

// The straggler and kill jobs: steps of computing (sleeping) and an all_reduce.
int run_steps(const std::string& mode) {
  auto group = comm::init_process_group();
  int rank = group->rank();
  bool straggler = mode == "straggler";
  int steps = straggler ? 40 : 20;
  std::vector<float> gradient(16384, 1.0f);
  for (int step = 0; step < steps; ++step) {
    auto compute = std::chrono::milliseconds(straggler && rank == 2 ? 20 : 2);
    std::this_thread::sleep_for(compute);
    if (!straggler && rank == 2 && step == 10) ::kill(::getpid(), SIGKILL);
    try {
      group->all_reduce(gradient);
    } catch (const comm::Error& error) {
      std::cout << "rank " << rank << ": step " << step << " failed (" << comm::to_string(error.code())
                << "); shrinking" << std::endl;
      group = group->shrink({});
      --step;  // the step again, on the survivors
      continue;
    }
  }
  group->barrier();
  std::cout << "rank " << rank << ": " << steps << " steps done on " << group->size() << " ranks" << std::endl;
  return 0;
}

int run(const std::string& mode, const std::string& dir) {
  if (mode == "straggler" || mode == "kill") return run_steps(mode);
  auto world = comm::init_process_group();
  int rank = world->rank(), size = world->size();
  const std::string& name = world->name();
  CallList calls;
  std::string list = dir + "/calls_rank" + std::to_string(rank) + ".json";

  std::vector<float> values(1024, static_cast<float>(rank + 1));
  for (int i = 0; i < 3; ++i) {
    world->all_reduce(values);
    calls.add({"all_reduce", name, 1024, "float32", -1});
  }
  std::vector<double> one(16, 1.0);
  world->broadcast(one, 1 % size);
  calls.add({"broadcast", name, 16, "float64", 1 % size});
  // A ring of sends: each rank sends to the next and receives from the previous.
  std::vector<std::int32_t> out(7, rank), in(7, -1);
  int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  if (rank % 2 == 0) {
    world->send(out, next, 5);
    calls.add({"send", name, 7, "int32", next});
    world->recv(in, previous, 5);
    calls.add({"recv", name, 7, "int32", previous});
  } else {
    world->recv(in, previous, 5);
    calls.add({"recv", name, 7, "int32", previous});
    world->send(out, next, 5);
    calls.add({"send", name, 7, "int32", next});
  }
  if (in[0] != previous) {
    std::cerr << "rank " << rank << ": received " << in[0] << " from rank " << previous << "\n";
    return 1;
  }
  // The i-forms, finished by waiting on their Work.
  std::vector<std::int64_t> big_out(4096, rank), big_in(4096, -1);
  auto receive = world->irecv(big_in, previous, 9);
  calls.add({"recv", name, 4096, "int64", previous});
  auto sent = world->isend(big_out, next, 9);
  calls.add({"send", name, 4096, "int64", next});
  sent->wait();
  receive->wait();
  world->barrier();
  calls.add({"barrier", name, -1, "", -1});
  std::vector<int> evens;
  for (int member = 0; member < size; member += 2) evens.push_back(member);
  auto group = world->new_group(evens);
  calls.add({"new_group", name, static_cast<long long>(evens.size()), "", -1});
  if (group->rank() >= 0) {
    std::vector<std::int64_t> counts(3, 1);
    group->all_reduce(counts);
    calls.add({"all_reduce", group->name(), 3, "int64", -1});
  }
  if (mode == "calls") {
    calls.write(list);
    std::string path = comm::dump_trace(dir);
    std::cout << "rank " << rank << ": dumped " << path << std::endl;
    const char* temporary = std::getenv("TMPDIR");
    if (temporary == nullptr) return 0;
    std::string signalled = std::string(temporary) + "/comm_trace_rank" + std::to_string(rank) + ".json";
    ::kill(::getpid(), SIGUSR2);
    for (int wait = 0; wait < 500 && !std::filesystem::exists(signalled); ++wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::cout << "rank " << rank << ": " << (std::filesystem::exists(signalled) ? "signal dump " : "no signal dump ")
              << signalled << std::endl;
    return 0;
  }
  // skip: the last rank never calls the final all_reduce.
  calls.write(list);
  if (rank == size - 1) {
    std::cout << "rank " << rank << ": skipping the all_reduce" << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(8));
    return 0;
  }
  calls.add({"all_reduce", name, 1024, "float32", -1});
  calls.write(list);
  try {
    world->all_reduce(values);
  } catch (const comm::Error& error) {
    std::cout << "rank " << rank << ": " << comm::to_string(error.code()) << ": " << error.what() << std::endl;
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (argc != 3 || (mode != "calls" && mode != "skip" && mode != "straggler" && mode != "kill")) {
    std::cerr << "usage: comm-trace-worker calls|skip|straggler|kill DIR\n";
    return 2;
  }
  try {
    return run(mode, argv[2]);
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
