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

int run_agree(const std::string& exclude_text, const std::string& action) {
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
  if (action.rfind("die-during:", 0) == 0) {
    int delay = std::stoi(action.substr(std::strlen("die-during:")));
    std::thread([delay] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      ::kill(::getpid(), SIGKILL);
    }).detach();
  }
  std::shared_ptr<comm::ProcessGroup> shrunk;
  try {
    shrunk = group->shrink(exclude);
  } catch (const comm::Error& error) {
    say(std::string("agree error ") + comm::to_string(error.code()) + ": " + error.what());
    return 0;
  }
  // Who is in it, as world ranks: what the checker compares across ranks.
  std::vector<std::int64_t> members(static_cast<std::size_t>(shrunk->size()));
  std::int64_t mine = group->rank();
  try {
    shrunk->all_gather(comm::Buffer(members.data(), members.size(), comm::DType::Int64),
                       comm::Buffer(&mine, 1, comm::DType::Int64));
  } catch (const comm::Error& error) {
    // The group was made (the invariant counts it) but a member died since.
    say("agree members-unknown size=" + std::to_string(shrunk->size()) + " " + comm::to_string(error.code()));
    return 0;
  }
  std::string text;
  for (auto member : members) text += (text.empty() ? "" : ",") + std::to_string(member);
  say("agree members=" + text);
  return 0;
}

}  // namespace recovery_worker
