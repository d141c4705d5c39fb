// The C API's communicators: ids, init (blocking, non-blocking, grouped), split, destroy, abort,
// and what a communicator reports about itself and its errors.
#include <map>
#include <mutex>
#include <thread>

#include "comm/comm.h"
#include "comm/comm.hpp"
#include "cuda/memory.hpp"
#include "libcomm/c_api/communicator.hpp"
#include "libcomm/c_api/group_calls.hpp"
#include "libcomm/c_api/results.hpp"
#include "libcomm/c_api/unique_id.hpp"

using comm::c_api::CallError;
using comm::c_api::guarded;
using comm::c_api::require;

namespace {

// Owns every communicator ever made; a comm_t is the raw pointer. A destroyed or aborted one
// stays as a tombstone (a few hundred bytes, what it held released), so that a call on a stale
// handle is refused with what happened instead of touching freed memory, as NCCL's would. Only
// making and ending one looks here (the operations take the pointer as it is).
struct Communicators {
  std::mutex mutex;
  std::map<comm_communicator*, std::shared_ptr<comm_communicator>> made;
};

Communicators& communicators() {
  static Communicators registry;
  return registry;
}

comm_t adopt(std::shared_ptr<comm_communicator> communicator) {
  std::lock_guard lock(communicators().mutex);
  comm_t handle = communicator.get();
  communicators().made.emplace(handle, std::move(communicator));
  return handle;
}

// Ends the communicator behind `comm` (see comm_communicator::end): the group it held, for the
// caller to let go or abort.
std::shared_ptr<comm::ProcessGroup> end(comm_t comm, comm_communicator::End how) {
  require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm is NULL");
  std::shared_ptr<comm_communicator> communicator;
  {
    std::lock_guard lock(communicators().mutex);
    auto found = communicators().made.find(comm);
    require(found != communicators().made.end(), COMM_INVALID_ARGUMENT, "comm is not a communicator that libcomm made");
    communicator = found->second;
  }
  return communicator->end(how);
}

struct Config {
  bool blocking = true;
  std::optional<std::chrono::milliseconds> timeout;
};

Config read_config(const comm_config_t* config) {
  Config read;
  if (!config) return read;
  require(config->size >= sizeof(comm_config_t) && config->magic == COMM_CONFIG_MAGIC, COMM_INVALID_ARGUMENT,
          "config was not made from COMM_CONFIG_INITIALIZER");
  require(config->blocking == 0 || config->blocking == 1, COMM_INVALID_ARGUMENT, "config->blocking must be 0 or 1");
  require(config->timeout_ms >= 0, COMM_INVALID_ARGUMENT, "config->timeout_ms must be 0 (the default) or positive");
  read.blocking = config->blocking == 1;
  if (config->timeout_ms > 0) read.timeout = std::chrono::milliseconds(config->timeout_ms);
  return read;
}

std::chrono::milliseconds default_timeout() { return comm::InitOptions{}.timeout; }

comm_result_t init_rank(comm_t* comm, int nranks, const comm_unique_id& id, int rank, const comm_config_t* config) {
  constexpr const char* kOp = "comm_init_rank";
  return guarded(nullptr, kOp, [&] {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm (where to put the communicator) is NULL");
    *comm = nullptr;
    require(nranks >= 1, COMM_INVALID_ARGUMENT, "nranks must be at least 1");
    require(rank >= 0 && rank < nranks, COMM_INVALID_ARGUMENT, "rank must be in [0, nranks)");
    Config settings = read_config(config);
    auto contents = comm::c_api::read_unique_id(id);
    auto communicator = std::make_shared<comm_communicator>(rank, nranks, comm::cuda::current_device(),
                                                            settings.timeout.value_or(default_timeout()));
    communicator->hosted_store = comm::c_api::hold_hosted_store(contents);
    communicator->id = contents;
    // The init holds the communicator too: a non-blocking one destroyed or aborted before it
    // finishes ends when its init does, on the init's thread.
    auto init = [communicator, contents, nranks, rank] {
      try {
        auto store = std::make_shared<comm::TcpStore>(
            contents.host, contents.port,
            comm::TcpStoreOptions{.timeout = communicator->timeout, .job_secret = contents.secret});
        communicator->ready(comm::init_process_group(comm::InitOptions{.rank = rank,
                                                                       .world_size = nranks,
                                                                       .timeout = communicator->timeout,
                                                                       .store = std::move(store),
                                                                       .job_secret = contents.secret}));
      } catch (...) {
        communicator->failed(comm::c_api::fail(communicator.get(), kOp));
        throw;
      }
    };
    *comm = adopt(communicator);
    if (!settings.blocking && !comm::c_api::in_group()) {
      std::thread([init] {
        try {
          init();
        } catch (...) {  // kept as the communicator's async error and last error
        }
      }).detach();
      return COMM_IN_PROGRESS;
    }
    comm::c_api::run_or_queue_init(communicator.get(), std::move(init));
    return COMM_SUCCESS;
  });
}

}  // namespace

extern "C" {

comm_result_t comm_get_version(int* version) {
  return guarded(nullptr, "comm_get_version", [&] {
    require(version != nullptr, COMM_INVALID_ARGUMENT, "version is NULL");
    *version = LIBCOMM_VERSION_CODE;
    return COMM_SUCCESS;
  });
}

comm_result_t comm_dump_trace(const char* dir) {
  return guarded(nullptr, "comm_dump_trace", [&] {
    comm::dump_trace(dir != nullptr ? dir : "");
    return COMM_SUCCESS;
  });
}

comm_result_t comm_get_unique_id(comm_unique_id* id) {
  return guarded(nullptr, "comm_get_unique_id", [&] {
    require(id != nullptr, COMM_INVALID_ARGUMENT, "id is NULL");
    *id = comm::c_api::make_unique_id();
    return COMM_SUCCESS;
  });
}

comm_result_t comm_init_rank(comm_t* comm, int nranks, comm_unique_id id, int rank) {
  return init_rank(comm, nranks, id, rank, nullptr);
}

comm_result_t comm_init_rank_config(comm_t* comm, int nranks, comm_unique_id id, int rank, comm_config_t* config) {
  return init_rank(comm, nranks, id, rank, config);
}

comm_result_t comm_init_from_environment(comm_t* comm, comm_config_t* config) {
  return guarded(nullptr, "comm_init_from_environment", [&] {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm (where to put the communicator) is NULL");
    *comm = nullptr;
    Config settings = read_config(config);
    require(settings.blocking, COMM_INVALID_ARGUMENT, "comm_init_from_environment is blocking (config->blocking 0)");
    comm::InitOptions options;
    if (settings.timeout) options.timeout = *settings.timeout;
    auto group = comm::init_process_group(options);
    auto communicator = std::make_shared<comm_communicator>(group->rank(), group->size(), comm::cuda::current_device(),
                                                            group->timeout());
    communicator->ready(std::move(group));
    *comm = adopt(std::move(communicator));
    return COMM_SUCCESS;
  });
}

comm_result_t comm_split(comm_t comm, int color, int key, comm_t* newcomm, comm_config_t* config) {
  return guarded(comm, "comm_split", [&] {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm is NULL");
    require(newcomm != nullptr, COMM_INVALID_ARGUMENT, "newcomm is NULL");
    *newcomm = nullptr;
    require(color >= 0 || color == COMM_SPLIT_NOCOLOR, COMM_INVALID_ARGUMENT,
            "color must be non-negative, or COMM_SPLIT_NOCOLOR");
    Config settings = read_config(config);
    auto& parent = comm->group();
    // Every rank learns every rank's (color, key); each color's ranks, ordered by key and then
    // by rank, make their group, the form only members call, keyed by this split's number.
    std::vector<std::int64_t> mine{color, key};
    std::vector<std::int64_t> everyone(2 * static_cast<std::size_t>(parent.size()));
    parent.all_gather(everyone, mine);
    int split = comm->splits_made++;
    if (color == COMM_SPLIT_NOCOLOR) return COMM_SUCCESS;
    std::vector<std::pair<std::int64_t, int>> members;  // (key, parent rank)
    for (int r = 0; r < parent.size(); ++r) {
      if (everyone[2 * static_cast<std::size_t>(r)] == color) {
        members.emplace_back(everyone[2 * static_cast<std::size_t>(r) + 1], r);
      }
    }
    std::sort(members.begin(), members.end());
    std::vector<int> ranks;
    int position = -1;
    for (const auto& [member_key, parent_rank] : members) {
      if (parent_rank == parent.rank()) position = static_cast<int>(ranks.size());
      ranks.push_back(parent_rank);
    }
    auto timeout = settings.timeout.value_or(comm->timeout);
    auto child = std::make_shared<comm_communicator>(position, static_cast<int>(ranks.size()),
                                                     comm::cuda::current_device(), timeout);
    child->hosted_store = comm->hosted_store;  // the child's store is the parent's
    child->id = comm->id;
    child->ready(
        parent.new_group(std::move(ranks), "c-split/" + std::to_string(split) + "/" + std::to_string(color), timeout));
    *newcomm = adopt(std::move(child));
    return COMM_SUCCESS;
  });
}

namespace {

// A communicator of a group made from `parent`'s (shrink, grow): the parent's store and id.
comm_t derived(const comm_communicator& parent, std::shared_ptr<comm::ProcessGroup> group) {
  auto child = std::make_shared<comm_communicator>(group->rank(), group->size(), comm::cuda::current_device(),
                                                   parent.timeout);
  child->hosted_store = parent.hosted_store;
  child->id = parent.id;
  child->ready(std::move(group));
  return adopt(std::move(child));
}

}  // namespace

comm_result_t comm_revoke(comm_t comm, const char* reason) {
  return guarded(comm, "comm_revoke", [&] {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm is NULL");
    comm->group().revoke(reason != nullptr ? reason : "");
    return COMM_SUCCESS;
  });
}

comm_result_t comm_shrink(comm_t comm, const int* exclude, int exclude_count, comm_t* newcomm, comm_config_t* config) {
  return guarded(comm, "comm_shrink", [&] {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm is NULL");
    require(newcomm != nullptr, COMM_INVALID_ARGUMENT, "newcomm is NULL");
    *newcomm = nullptr;
    require(exclude_count >= 0, COMM_INVALID_ARGUMENT, "exclude_count is negative");
    require(exclude != nullptr || exclude_count == 0, COMM_INVALID_ARGUMENT, "exclude is NULL with a count above 0");
    read_config(config);  // checked like comm_split's; the new communicator keeps comm's timeout
    *newcomm = derived(*comm, comm->group().shrink(std::vector<int>(exclude, exclude + exclude_count)));
    return COMM_SUCCESS;
  });
}

comm_result_t comm_get_grow_id(comm_t comm, comm_unique_id* id) {
  return guarded(comm, "comm_get_grow_id", [&] {
    require(comm != nullptr && id != nullptr, COMM_INVALID_ARGUMENT, "comm or id is NULL");
    require(comm->id.has_value(), COMM_INVALID_ARGUMENT,
            "this communicator was made from the environment, not from an id: newcomers join it with COMM_JOIN "
            "(commrun --restart) or InitOptions::join, and comm_grow's id is not needed");
    *id = comm::c_api::encode_unique_id(*comm->id);
    return COMM_SUCCESS;
  });
}

comm_result_t comm_grow(comm_t comm, int nranks, const comm_unique_id* id, int rank, comm_t* newcomm,
                        comm_config_t* config) {
  return guarded(comm, "comm_grow", [&] {
    require(newcomm != nullptr, COMM_INVALID_ARGUMENT, "newcomm is NULL");
    *newcomm = nullptr;
    Config settings = read_config(config);
    if (comm != nullptr) {  // a member: opens nranks - size places
      require(rank == -1, COMM_INVALID_ARGUMENT, "a member of comm passes rank -1 (it keeps its rank)");
      require(nranks > comm->size, COMM_INVALID_ARGUMENT,
              "nranks must be above the communicator's size: it is the grown communicator's size");
      *newcomm = derived(*comm, comm->group().grow(nranks - comm->size));
      return COMM_SUCCESS;
    }
    // A newcomer: the id a member made with comm_get_grow_id, and its place.
    require(id != nullptr, COMM_INVALID_ARGUMENT, "a newcomer (comm NULL) needs the id from comm_get_grow_id");
    require(rank >= 0 && rank < nranks, COMM_INVALID_ARGUMENT, "rank must be in [0, nranks)");
    auto contents = comm::c_api::read_unique_id(*id);
    auto timeout = settings.timeout.value_or(default_timeout());
    auto store = std::make_shared<comm::TcpStore>(
        contents.host, contents.port, comm::TcpStoreOptions{.timeout = timeout, .job_secret = contents.secret});
    auto grown = comm::init_process_group(comm::InitOptions{.rank = rank,
                                                            .world_size = nranks,
                                                            .timeout = timeout,
                                                            .store = std::move(store),
                                                            .job_secret = contents.secret,
                                                            .join = "default_pg"});
    auto child =
        std::make_shared<comm_communicator>(grown->rank(), grown->size(), comm::cuda::current_device(), timeout);
    child->id = contents;
    child->ready(std::move(grown));
    *newcomm = adopt(std::move(child));
    return COMM_SUCCESS;
  });
}

comm_result_t comm_destroy(comm_t comm) {
  return guarded(nullptr, "comm_destroy", [&] {
    // The group ends here unless a non-blocking init still runs; then it ends with the init.
    end(comm, comm_communicator::End::kDestroyed);
    return COMM_SUCCESS;
  });
}

comm_result_t comm_abort(comm_t comm) {
  return guarded(nullptr, "comm_abort", [&] {
    if (auto group = end(comm, comm_communicator::End::kAborted)) group->abort();
    return COMM_SUCCESS;
  });
}

comm_result_t comm_get_async_error(comm_t comm, comm_result_t* async_error) {
  return guarded(comm, "comm_get_async_error", [&] {
    require(comm != nullptr && async_error != nullptr, COMM_INVALID_ARGUMENT, "comm or async_error is NULL");
    *async_error = comm->async_error();
    return COMM_SUCCESS;
  });
}

comm_result_t comm_count(comm_t comm, int* count) {
  return guarded(comm, "comm_count", [&] {
    require(comm != nullptr && count != nullptr, COMM_INVALID_ARGUMENT, "comm or count is NULL");
    *count = comm->size;
    return COMM_SUCCESS;
  });
}

comm_result_t comm_user_rank(comm_t comm, int* rank) {
  return guarded(comm, "comm_user_rank", [&] {
    require(comm != nullptr && rank != nullptr, COMM_INVALID_ARGUMENT, "comm or rank is NULL");
    *rank = comm->rank;
    return COMM_SUCCESS;
  });
}

comm_result_t comm_cu_device(comm_t comm, int* device) {
  return guarded(comm, "comm_cu_device", [&] {
    require(comm != nullptr && device != nullptr, COMM_INVALID_ARGUMENT, "comm or device is NULL");
    *device = comm->device;
    return COMM_SUCCESS;
  });
}

const char* comm_get_error_string(comm_result_t result) {
  switch (result) {
    case COMM_SUCCESS: return "no error";
    case COMM_CUDA_ERROR: return "unhandled cuda error";
    case COMM_SYSTEM_ERROR: return "unhandled system error";
    case COMM_INTERNAL_ERROR: return "internal error";
    case COMM_INVALID_ARGUMENT: return "invalid argument";
    case COMM_INVALID_USAGE: return "invalid usage";
    case COMM_REMOTE_ERROR: return "remote process exited or there was a network error";
    case COMM_IN_PROGRESS: return "operation in progress";
  }
  return "unknown result code";
}

const char* comm_get_last_error(comm_t comm) { return comm ? comm->last_error() : comm::c_api::last_error_of_thread(); }

}  // extern "C"
