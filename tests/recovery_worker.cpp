// comm-recovery-worker: the rank program of the recovery tests (test_recovery.cpp), joined
// through env:// (the test hosts the store, so that any rank may die). Every line it prints
// starts with "rank R:" (R: its rank in the job as started).
//   revoke                 rank 1 revokes the world while the others wait in an all_reduce for
//                          it; everyone then shrinks with nobody out and checks an all_reduce
//   after-abort            every rank aborts the world: shrink, grow and an all_reduce must then
//                          each fail at once (issue 44, finding 2: shrink returned a group of one)
//   frozen-shrink          rank 2 stops itself (SIGSTOP) after a barrier; ranks 0 and 1 shrink with
//                          COMM_TIMEOUT=3: both must fail naming rank 2, the silent one, not
//                          rank 0, the live coordinator (issue 44, finding 3)
//   agree EXCLUDE ACTION   one rank of the agreement fault suite (run_agreement_faults.py): after a
//                          barrier, calls shrink(EXCLUDE) (world ranks, comma-separated, or -)
//                          and prints "agree members=A,B,..." (the new group's world ranks, from
//                          an all_gather over it) or "agree error CODE: ...". ACTION: call, skip
//                          (never calls shrink, exits after 1 s), freeze (SIGSTOP before shrink),
//                          die-before (SIGKILL before shrink), die-during:MS (SIGKILL MS ms into it)
//   agree EXCLUDE ACTION GROW  the same, then a member of the new group grows it by GROW and prints
//                          "agree grown members=..." (job ranks; a newcomer's is its RANK) or "agree
//                          grown error ..."; ACTION also freeze-in-grow, die-in-grow:MS
//   agree-join ACTION      a newcomer of that growth (call, or die-during:MS into its join)
//   left-behind            rank 3 dies; rank 2 leaves because of it while rank 0 waits for it
//                          in a group of the two: rank 0's error must name rank 3
//   subgroup               rank 2 dies in a group of ranks 0-2: 0 and 1 shrink it, then all three
//                          survivors shrink the world
//   grow                   rank 2 dies; the survivors shrink, then grow by one: a process in mode
//   newcomer               newcomer joins (InitOptions::join), receives the model by broadcast,
//                          and all four all_reduce
//   grow-twice             the same, then rank 1 dies and they grow back again: two processes in
//   newcomer-twice         mode newcomer-twice start at once, one joins each growth
//   train STEPS KILLS      data-parallel steps: every step all_reduces a gradient (integers in
//                          doubles, so sums are exact in any order) and updates the parameters.
//                          KILLS: "rank@step[:when]" comma-separated, when = before (default:
//                          SIGKILL before the step's all_reduce), during (after starting it),
//                          shrink (at its first shrink, whatever step failed), grow (at its first
//                          grow), join (a newcomer, once joined, before the state reaches it). A
//                          failed step is redone on the group shrink() returns; with
//                          COMM_RESTARTS=N the survivors then grow back by the ranks lost, up to N
//                          in all (the test starts a newcomer per death). At the end each survivor
//                          prints "final SIZE CHECKSUM" and its parameters' sum.
//   train-join STEPS KILLS a newcomer to that training: joins a growth, receives the state, goes on
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.hpp"
#include "tests/recovery_worker.hpp"

namespace recovery_worker {

int job_rank() { return std::atoi(std::getenv("RANK")); }

void say(const std::string& line) { std::cout << "rank " << job_rank() << ": " << line << std::endl; }

// Through the store the test hosts at MASTER_ADDR:MASTER_PORT (rank 0 may die). A newcomer
// joins the running group instead (InitOptions::join).
std::shared_ptr<comm::ProcessGroup> join(bool newcomer) {
  comm::InitOptions options;
  options.store = std::make_shared<comm::TcpStore>(std::getenv("MASTER_ADDR"),
                                                   static_cast<std::uint16_t>(std::atoi(std::getenv("MASTER_PORT"))),
                                                   comm::TcpStoreOptions{.timeout = std::chrono::seconds(20)});
  if (newcomer) {
    options.join = "default_pg";
  } else {
    options.rank = job_rank();
    options.world_size = std::atoi(std::getenv("WORLD_SIZE"));
  }
  options.timeout = std::chrono::seconds(20);
  return comm::init_process_group(options);
}

}  // namespace recovery_worker

namespace {

using namespace recovery_worker;

// Runs a call that must fail (a rank is dead, or the group revoked): says "LABEL peer=P: error"
// and returns true; says "went through" and returns false if it did not fail.
bool fails(const std::string& label, const std::function<void()>& call) {
  try {
    call();
  } catch (const comm::Error& error) {
    say(label + " peer=" + std::to_string(error.peer()) + ": " + error.what());
    return true;
  }
  say("went through");
  return false;
}

// The grown group's check: rank 0 broadcasts the "model" (the survivors' parameters), every rank
// checks it and an all_reduce of rank + 1 over the whole group.
int check_grown(comm::ProcessGroup& grown, std::vector<double>& model) {
  grown.broadcast(comm::Buffer(model.data(), model.size(), comm::DType::Float64), 0);
  bool model_ok = true;
  for (std::size_t i = 0; i < model.size(); ++i) model_ok = model_ok && model[i] == 0.5 * double(i);
  std::int64_t value = grown.rank() + 1;
  grown.all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  say("grown size=" + std::to_string(grown.size()) + " rank=" + std::to_string(grown.rank()) +
      " sum=" + std::to_string(value) + (model_ok ? " model ok" : " MODEL WRONG"));
  return model_ok ? 0 : 1;
}

// What this process holds of its peers: mappings of shared-memory segments, and sockets.
std::string held() {
  int mappings = 0, sockets = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) mappings += line.find("/dev/shm/comm-") != std::string::npos;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    sockets += std::filesystem::read_symlink(entry.path(), error).string().rfind("socket:", 0) == 0;
  }
  return "mappings=" + std::to_string(mappings) + " sockets=" + std::to_string(sockets);
}

// The model the growth tests hand their newcomers.
std::vector<double> growth_model() {
  std::vector<double> model(1000);
  for (std::size_t i = 0; i < model.size(); ++i) model[i] = 0.5 * double(i);
  return model;
}

// `victim` (its rank in the job as started) dies once the others are surely past the call they
// made last (else they fail in it); the others' next all_reduce must fail.
bool lose(comm::ProcessGroup& group, int victim, const std::string& label) {
  if (job_rank() == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(::getpid(), SIGKILL);
  }
  std::int64_t value = 1;
  return fails(label, [&] { group.all_reduce(comm::Buffer(&value, 1, comm::DType::Int64)); });
}

// Rank 2 dies; the survivors shrink, then grow back by one: a newcomer (mode newcomer) joins,
// receives the model and the four all_reduce.
int run_grow() {
  auto group = join();
  std::vector<double> model = growth_model();
  std::int64_t value = 1;
  group->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  say("holds before " + held());
  if (!lose(*group, 2, "failed")) return 1;
  auto shrunk = group->shrink();
  say("shrunk size=" + std::to_string(shrunk->size()));
  say("holds after " + held());
  auto grown = shrunk->grow(1);
  return check_grown(*grown, model);
}

int run_newcomer() {
  auto grown = join(true);
  std::vector<double> model(1000, -1.0);
  return check_grown(*grown, model);
}

// grow-twice's second round: the member started as rank 1 dies; the rest shrink and grow back
// again, taking in the newcomer that did not get a place the first time.
int grow_again(std::shared_ptr<comm::ProcessGroup> group, std::vector<double>& model) {
  group->barrier();
  if (!lose(*group, 1, "failed again")) return 1;
  auto grown = group->shrink()->grow(1);
  std::int64_t round = 2;
  grown->broadcast(comm::Buffer(&round, 1, comm::DType::Int64), 0);
  return check_grown(*grown, model);
}

// Two deaths, one after the other, each replaced: ranks 2 and then 1 die, the survivors grow
// back twice. Two newcomers (mode newcomer-twice) start at once: one takes the first growth's
// place, the other finds it taken and waits for the second growth.
int run_grow_twice() {
  auto group = join();
  std::vector<double> model = growth_model();
  std::int64_t value = 1;
  group->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  if (!lose(*group, 2, "failed")) return 1;
  auto grown = group->shrink()->grow(1);
  std::int64_t round = 1;
  grown->broadcast(comm::Buffer(&round, 1, comm::DType::Int64), 0);
  if (check_grown(*grown, model) != 0) return 1;
  return grow_again(grown, model);
}

int run_newcomer_twice() {
  auto grown = join(true);
  std::vector<double> model(1000, -1.0);
  std::int64_t round = 0;
  grown->broadcast(comm::Buffer(&round, 1, comm::DType::Int64), 0);
  say("joined in round " + std::to_string(round));
  if (check_grown(*grown, model) != 0) return 1;
  return round == 1 ? grow_again(grown, model) : 0;
}

int run_revoke() {
  auto group = join();
  std::vector<float> data(1 << 20, 1.0f);  // 4 MiB: large messages are on their way when it happens
  try {
    if (group->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      group->revoke("the test says so");
      say("revoked");
    }
    group->all_reduce(comm::Buffer(data.data(), data.size(), comm::DType::Float32));
    say("all_reduce went through");
    return 1;
  } catch (const comm::RevokedError& error) {
    say(std::string("RevokedError peer=") + std::to_string(error.peer()) + " " + error.what());
  }
  // A revoked group stays revoked: a later call fails at once.
  try {
    group->barrier();
    say("barrier went through");
    return 1;
  } catch (const comm::RevokedError&) {
    say("barrier revoked");
  }
  auto shrunk = group->shrink();
  std::int64_t value = shrunk->rank() + 1;
  shrunk->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  say("shrunk size=" + std::to_string(shrunk->size()) + " rank=" + std::to_string(shrunk->rank()) +
      " sum=" + std::to_string(value));
  return 0;
}

// Rank 3 is killed while ranks 1 and 2 wait for it in a world all_reduce; rank 0 waits for rank 2
// in a group of {0, 2}. Rank 2 gives up when its call fails and leaves: rank 0 must hear that
// rank 3's death is why, not only that rank 2 left.
int run_left_behind() {
  auto group = join();
  auto pair = group->new_group({0, 2});
  std::int64_t value = 1;
  if (group->rank() == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGKILL);
  }
  comm::ProcessGroup& waits_in = group->rank() == 0 ? *pair : *group;
  return fails("failed", [&] { waits_in.all_reduce(comm::Buffer(&value, 1, comm::DType::Int64)); }) ? 0 : 1;
}

// A sub-group shrinks the same way: ranks 0-2 work in a group of their own, rank 2 dies; ranks 0
// and 1 shrink the sub-group, while rank 3, outside it, finds the world revoked by the death (a
// barrier fails) and shrinks the world with them afterwards. (Rank 3 shrinking the world at once
// would revoke it under the others' first world call, which is what revoke is for.)
int run_subgroup() {
  auto group = join();
  auto part = group->new_group({0, 1, 2});
  std::int64_t value = 1;
  group->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  if (group->rank() == 2) {  // once the others are surely past the world's first call
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(::getpid(), SIGKILL);
  }
  // Rank 3 waits in the world until the death revokes it (not shrinking first).
  if (group->rank() == 3 && !fails("world failed", [&] { group->barrier(); })) return 1;
  if (group->rank() < 3) {
    if (!fails("part failed", [&] { part->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64)); })) return 1;
    auto shrunk = part->shrink();
    std::int64_t mine = group->rank() + 1;
    shrunk->all_reduce(comm::Buffer(&mine, 1, comm::DType::Int64));
    say("part shrunk size=" + std::to_string(shrunk->size()) + " sum=" + std::to_string(mine));
  }
  // The world was revoked by the death too (every member saw it): it shrinks to 0, 1, 3.
  auto world = group->shrink();
  std::int64_t mine = group->rank() + 1;
  world->all_reduce(comm::Buffer(&mine, 1, comm::DType::Int64));
  say("world shrunk size=" + std::to_string(world->size()) + " sum=" + std::to_string(mine));
  return 0;
}

struct Kill {
  int rank, step;
  std::string when;
};

std::vector<Kill> parse_kills(const std::string& text) {
  std::vector<Kill> kills;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item.empty() || item == "none") continue;
    Kill kill{std::atoi(item.c_str()), std::atoi(item.c_str() + item.find('@') + 1), "before"};
    if (auto colon = item.find(':'); colon != std::string::npos) kill.when = item.substr(colon + 1);
    kills.push_back(kill);
  }
  return kills;
}

// A kill "during the shrink" strikes at this rank's first shrink, whichever step failed (a rank
// killed before step k may have made the others fail step k-1 already); so do kills at a grow
// and at a newcomer's join.
void die_if(const std::vector<Kill>& kills, int step, const std::string& when) {
  bool any_step = when == "shrink" || when == "grow" || when == "join";
  for (const auto& kill : kills) {
    if (kill.rank == job_rank() && (kill.step == step || any_step) && kill.when == when) {
      std::cout.flush();
      ::kill(::getpid(), SIGKILL);
    }
  }
}

// The gradient rank `rank` (of the job as started) brings to `step`: small integers, exact in
// doubles whatever order they are summed in.
void gradient(std::vector<double>& out, int rank, int step) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = double((rank + 1) * (int(i % 7) + 1) * (step + 1) % 1000);
}

// The training job's state: what a newcomer receives, and what every member agrees on.
struct Training {
  std::shared_ptr<comm::ProcessGroup> group;
  std::vector<double> parameters = std::vector<double>(1 << 17, 0.0);  // 1 MiB: large messages too
  std::vector<double> before_step = parameters;  // a rank one step ahead of others rolls back to it
  // step; replacements still to come (COMM_RESTARTS, less those admitted); ranks lost and not
  // yet replaced. The same on every member.
  std::int64_t step = 0, restarts_left = 0, owed = 0;
  int shrinks = 0;
};

// Rank 0 of a grown group hands the newcomers the model and the counts.
void share_state(Training& training) {
  training.group->broadcast(comm::Buffer(training.parameters.data(), training.parameters.size(), comm::DType::Float64),
                            0);
  std::int64_t counts[3] = {training.step, training.restarts_left, training.owed};
  training.group->broadcast(comm::Buffer(counts, 3, comm::DType::Int64), 0);
  training.step = counts[0];
  training.restarts_left = counts[1];
  training.owed = counts[2];
  training.before_step = training.parameters;
}

// After a failed step (or a failed recovery): shrink, agree on the step to redo, and grow back
// by the ranks lost while replacements are coming (the test starts one per death, up to
// COMM_RESTARTS). A death during any of it fails it on every member: they start over.
void recover(Training& training, const std::vector<Kill>& kills) {
  while (true) {
    try {
      die_if(kills, static_cast<int>(training.step), "shrink");
      int before = training.group->size();
      training.group = training.group->shrink();
      ++training.shrinks;
      training.owed += before - training.group->size();
      // A survivor may have finished the step the others failed (the dead rank's part had
      // reached it): the survivors agree on the earliest step not done everywhere, and redo it.
      std::int64_t agreed = training.step;
      training.group->all_reduce(comm::Buffer(&agreed, 1, comm::DType::Int64), comm::ReduceOp::Min);
      if (agreed < training.step) training.parameters = training.before_step;
      say("shrunk to " + std::to_string(training.group->size()) + " ranks, now rank " +
          std::to_string(training.group->rank()) + "; redoing step " + std::to_string(agreed) +
          (agreed < training.step ? " (rolled back one step)" : ""));
      training.step = agreed;
      int coming = static_cast<int>(std::min(training.owed, training.restarts_left));
      if (coming > 0) {
        die_if(kills, static_cast<int>(training.step), "grow");
        training.group = training.group->grow(coming);
        training.restarts_left -= coming;
        training.owed -= coming;
        share_state(training);
        say("grown to " + std::to_string(training.group->size()) + " ranks at step " + std::to_string(training.step));
      }
      return;
    } catch (const comm::Error& error) {
      say(std::string("recovery failed, again: ") + comm::to_string(error.code()) + ": " + error.what());
    }
  }
}

// train, or train-join (a newcomer: it joins a growth and receives the state first).
int run_train(int steps, const std::vector<Kill>& kills, bool newcomer) {
  Training training;
  training.group = join(newcomer);
  const char* restarts = std::getenv("COMM_RESTARTS");
  training.restarts_left = restarts != nullptr ? std::atoi(restarts) : 0;
  if (newcomer) {
    die_if(kills, 0, "join");
    try {
      share_state(training);
    } catch (const comm::Error& error) {
      // Another rank died while the state was on its way: this one knows nothing to go on with,
      // and leaves (the members count it lost, and a replacement comes for it).
      say(std::string("no state: ") + comm::to_string(error.code()) + ": " + error.what());
      return 3;
    }
    say("joined at step " + std::to_string(training.step) + " as rank " + std::to_string(training.group->rank()));
  }
  std::vector<double> grad(training.parameters.size());
  while (training.step < steps) {
    int step = static_cast<int>(training.step);
    die_if(kills, step, "before");
    gradient(grad, job_rank(), step);
    try {
      auto work = training.group->iall_reduce(comm::Buffer(grad.data(), grad.size(), comm::DType::Float64));
      die_if(kills, step, "during");
      work->wait();
    } catch (const comm::Error& error) {
      say("step " + std::to_string(step) + " failed: " + comm::to_string(error.code()) + ": " + error.what());
      recover(training, kills);
      continue;
    }
    training.before_step = training.parameters;
    for (std::size_t i = 0; i < training.parameters.size(); ++i) training.parameters[i] -= grad[i];
    ++training.step;
  }
  std::uint64_t checksum = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(training.parameters.data());
  for (std::size_t i = 0; i < training.parameters.size() * sizeof(double); ++i)
    checksum = (checksum ^ bytes[i]) * 1099511628211ull;
  double sum = 0;
  for (double value : training.parameters) sum += value;
  std::ostringstream line;
  line.precision(17);
  line << "final " << training.group->size() << " " << checksum << " sum " << sum << " shrinks " << training.shrinks;
  say(line.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "revoke") return run_revoke();
    if (mode == "left-behind") return run_left_behind();
    if (mode == "after-abort") return run_after_abort();
    if (mode == "frozen-shrink") return run_frozen_shrink();
    if (mode == "agree" && argc > 3) return run_agree(argv[2], argv[3], argc > 4 ? std::atoi(argv[4]) : 0);
    if (mode == "agree-join" && argc > 2) return run_agree_join(argv[2]);
    if (mode == "grow") return run_grow();
    if (mode == "subgroup") return run_subgroup();
    if (mode == "newcomer") return run_newcomer();
    if (mode == "grow-twice") return run_grow_twice();
    if (mode == "newcomer-twice") return run_newcomer_twice();
    if (mode == "train" && argc > 3) return run_train(std::atoi(argv[2]), parse_kills(argv[3]), false);
    if (mode == "train-join" && argc > 3) return run_train(std::atoi(argv[2]), parse_kills(argv[3]), true);
  } catch (const comm::Error& error) {
    say(std::string("ERROR ") + comm::to_string(error.code()) + ": " + error.what());
    return 10;
  }
  std::cerr << "usage: comm-recovery-worker revoke | train STEPS KILLS" << std::endl;
  return 2;
}
