// The modes of comm-recovery-worker that probe shrink itself (issue 44): after abort(), with a
// frozen rank, and one rank of the agreement fault suite (recovery_worker.cpp lists the modes).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.hpp"
#include "tests/recovery_worker.hpp"

namespace recovery_worker {

// After abort() nothing makes a group: each call prints "refused NAME CODE MS" or "NAME went
// through" (which the test fails on).
int run_after_abort() {
  auto group = join();
  group->barrier();  // every rank is in before any aborts
  group->abort();
  auto attempt = [&](const char* name, const std::function<void()>& call) {
    auto started = std::chrono::steady_clock::now();
    try {
      call();
      say(std::string(name) + " went through");
    } catch (const comm::Error& error) {
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      say(std::string("refused ") + name + " " + comm::to_string(error.code()) + " " + std::to_string(took.count()) +
          " ms: " + error.what());
    }
  };
  attempt("shrink", [&] {
    auto shrunk = group->shrink();
    say("shrink gave size=" + std::to_string(shrunk->size()));
  });
  attempt("shrink-excluding", [&] { group->shrink({(group->rank() + 1) % group->size()}); });
  attempt("grow", [&] { group->grow(1); });
  attempt("all_reduce", [&] {
    std::int64_t value = 1;
    group->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
  });
  return 0;
}

// Prints "shrink failed peer=P CODE MS" (or "shrink gave size=N", which the test fails on).
int run_frozen_shrink() {
  ::setenv("COMM_TIMEOUT", "3", 1);
  auto group = join();
  group->barrier();
  if (group->rank() == 2) {
    ::raise(SIGSTOP);  // the test kills it
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 2 has stopped
  auto started = std::chrono::steady_clock::now();
  try {
    auto shrunk = group->shrink();
    say("shrink gave size=" + std::to_string(shrunk->size()));
  } catch (const comm::Error& error) {
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    say("shrink failed peer=" + std::to_string(error.peer()) + " " + comm::to_string(error.code()) + " " +
        std::to_string(took.count()) + " ms: " + error.what());
  }
  return 0;
}

namespace {

// Arms a SIGKILL of this process `delay` ms from now (a death in the middle of a call).
void die_in(int delay) {
  std::thread([delay] {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ::kill(::getpid(), SIGKILL);
  }).detach();
}

// The delay of an action "NAME:MS" that starts with `name`; -1 for any other action.
int delay_of(const std::string& action, const std::string& name) {
  return action.rfind(name + ":", 0) == 0 ? std::stoi(action.substr(name.size() + 1)) : -1;
}

// Prints "LABEL members=A,B,..." (the job ranks of `group`'s ranks, from an all_gather over
// it: what the suite compares across ranks) or "LABEL members-unknown ..." when a member died
// since the group was made (the group was made: the invariant counts it).
void report_members(comm::ProcessGroup& group, const std::string& label) {
  std::vector<std::int64_t> members(static_cast<std::size_t>(group.size()));
  std::int64_t mine = job_rank();
  try {
    group.all_gather(comm::Buffer(members.data(), members.size(), comm::DType::Int64),
                     comm::Buffer(&mine, 1, comm::DType::Int64));
  } catch (const comm::Error& error) {
    say(label + " members-unknown size=" + std::to_string(group.size()) + " " + comm::to_string(error.code()));
    return;
  }
  std::string text;
  for (auto member : members) text += (text.empty() ? "" : ",") + std::to_string(member);
  say(label + " members=" + text);
}

// The growth after the agreement, on a member (grow) or a newcomer (join): "agree grown ...".
void report_growth(const std::function<std::shared_ptr<comm::ProcessGroup>()>& make) {
  std::shared_ptr<comm::ProcessGroup> grown;
  try {
    grown = make();
  } catch (const comm::Error& error) {
    say(std::string("agree grown error ") + comm::to_string(error.code()) + ": " + error.what());
    return;
  }
  report_members(*grown, "agree grown");
}

}  // namespace

int run_agree(const std::string& exclude_text, const std::string& action, int grow_count) {
  auto group = join();
  std::vector<int> exclude;
  if (exclude_text != "-") {
    std::stringstream list(exclude_text);
    for (std::string item; std::getline(list, item, ',');) exclude.push_back(std::stoi(item));
  }
  try {
    group->barrier();
  } catch (const comm::Error&) {
    // A rank that got past it already shrinks (revoking the group): so does this one.
  }
  if (action == "skip") {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    say("agree skipped");
    return 0;
  }
  if (action == "freeze") ::raise(SIGSTOP);
  if (action == "die-before") ::kill(::getpid(), SIGKILL);
  if (int delay = delay_of(action, "die-during"); delay >= 0) die_in(delay);
  std::shared_ptr<comm::ProcessGroup> shrunk;
  try {
    shrunk = group->shrink(exclude);
  } catch (const comm::Error& error) {
    say(std::string("agree error ") + comm::to_string(error.code()) + ": " + error.what());
    return 0;
  }
  report_members(*shrunk, "agree");
  if (grow_count < 1) return 0;
  if (action == "freeze-in-grow") ::raise(SIGSTOP);
  if (int delay = delay_of(action, "die-in-grow"); delay >= 0) die_in(delay);
  report_growth([&] { return shrunk->grow(grow_count); });
  return 0;
}

int run_agree_join(const std::string& action) {
  if (int delay = delay_of(action, "die-during"); delay >= 0) die_in(delay);
  report_growth([] { return join(true); });
  return 0;
}

}  // namespace recovery_worker
