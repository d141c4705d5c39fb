#include "libcomm/c_api/group_calls.hpp"

#include <thread>
#include <vector>

#include "libcomm/c_api/communicator.hpp"
#include "libcomm/c_api/results.hpp"

namespace comm::c_api {
namespace {

struct QueuedInit {
  comm_communicator* comm;
  Init init;
};

struct QueuedOperation {
  comm_communicator* comm;
  Issue issue;
};

struct GroupState {
  int depth = 0;
  std::vector<QueuedInit> inits;
  std::vector<QueuedOperation> operations;
};

thread_local GroupState group_state;

// Each init waits for its peers, which may be other inits of this very group (several ranks in
// one process): they run side by side. A failed init is its communicator's state.
comm_result_t run_inits(std::vector<QueuedInit>& inits) {
  std::vector<comm_result_t> results(inits.size(), COMM_SUCCESS);
  {
    std::vector<std::jthread> threads;
    threads.reserve(inits.size());
    for (std::size_t i = 0; i < inits.size(); ++i) {
      threads.emplace_back([&, i] {
        results[i] = guarded(inits[i].comm, "comm_group_end (init)", [&] {
          inits[i].init();
          return COMM_SUCCESS;
        });
      });
    }
  }
  for (auto result : results) {
    if (result != COMM_SUCCESS) return result;
  }
  return COMM_SUCCESS;
}

comm_result_t run_operations(std::vector<QueuedOperation>& operations) {
  comm_result_t first = COMM_SUCCESS;
  auto note = [&](comm_result_t result) {
    if (first == COMM_SUCCESS) first = result;
  };
  std::vector<std::pair<comm_communicator*, std::shared_ptr<Work>>> works;
  for (auto& operation : operations) {
    std::shared_ptr<Work> work;
    note(guarded(operation.comm, "comm_group_end", [&] {
      work = operation.issue(operation.comm->group());
      return COMM_SUCCESS;
    }));
    if (work) works.emplace_back(operation.comm, std::move(work));
  }
  for (auto& [comm, work] : works) {
    note(guarded(comm, "comm_group_end", [&] {
      work->wait();
      return COMM_SUCCESS;
    }));
  }
  return first;
}

}  // namespace

std::atomic<int> threads_in_groups{0};

bool thread_in_group() { return group_state.depth > 0; }

void run_or_queue_init(comm_communicator* comm, Init init) {
  if (in_group()) {
    group_state.inits.push_back({comm, std::move(init)});
  } else {
    init();
  }
}

void queue_operation(comm_communicator* comm, Issue issue) {
  group_state.operations.push_back({comm, std::move(issue)});
}

comm_result_t group_start() {
  // A thread's own calls see its increment (program order); other threads' only send them to
  // their thread-local state for nothing.
  if (group_state.depth++ == 0) threads_in_groups.fetch_add(1, std::memory_order_relaxed);
  return COMM_SUCCESS;
}

comm_result_t group_end() {
  if (group_state.depth == 0) {
    return guarded(nullptr, "comm_group_end", []() -> comm_result_t {
      throw CallError(COMM_INVALID_USAGE, "no comm_group_start to end on this thread");
    });
  }
  if (--group_state.depth > 0) return COMM_SUCCESS;
  threads_in_groups.fetch_sub(1, std::memory_order_relaxed);
  auto inits = std::move(group_state.inits);
  auto operations = std::move(group_state.operations);
  group_state.inits.clear();
  group_state.operations.clear();
  comm_result_t inits_result = run_inits(inits);
  comm_result_t operations_result = run_operations(operations);
  return inits_result != COMM_SUCCESS ? inits_result : operations_result;
}

}  // namespace comm::c_api
