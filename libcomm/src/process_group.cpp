#include "comm/process_group.hpp"
#include "shared_arena.hpp"

#include <algorithm>
#include <string>

#include "check.hpp"
#include "collective_context.hpp"
#include "collective_queue.hpp"
#include "ipc_collectives.hpp"
#include "environment.hpp"
#include "gpu_lane.hpp"
#include "log.hpp"
#include "staged_collectives.hpp"
#include "transport.hpp"

namespace comm {

ProcessGroup::ProcessGroup(Identity identity, std::shared_ptr<Store> store,
                           std::shared_ptr<transport::Transport> transport, std::chrono::milliseconds timeout,
                           Layout layout)
    : identity_(std::move(identity)), store_(std::move(store)), transport_(std::move(transport)), timeout_(timeout),
      layout_(std::move(layout)), scratch_(std::make_unique<algorithms::ScratchPool>()),
      queue_(std::make_unique<detail::CollectiveQueue>()) {
  // Every member constructs the group at the same point (init_process_group, new_group), so the
  // segment of the shared-memory collectives is made here, collectively.
  if (rank() >= 0 && size() > 1 && std::string_view(transport_->medium()) == "shm") {
    arena_ = transport::SharedArena::create(*store_, "arena/" + std::to_string(layout_.id), rank(), size(), timeout_);
  }
}

ProcessGroup::~ProcessGroup() = default;

const char* ProcessGroup::transport_name() const { return transport_->medium(); }

void ProcessGroup::abort() { transport_->abort("ProcessGroup::abort() was called on rank " + std::to_string(rank())); }

// CUDA IPC needs every rank of the group on this host, which a group over shared memory has;
// anything else stages. COMM_CUDA_PATH overrides (it must be the same on every rank: ranks on
// different paths get a mismatch error on their first GPU call).
ProcessGroup::GpuPath ProcessGroup::gpu_path(const char* op) {
  if (gpu_path_) return *gpu_path_;
  std::string requested = environment::get("COMM_CUDA_PATH").value_or("auto");
  bool one_host = size() == 1 || std::string_view(transport_name()) == "shm";
  ErrorContext context{.rank = rank(), .op = op};
  COMM_CHECK(requested == "auto" || requested == "ipc" || requested == "staging", InvalidArgumentError, context,
             "COMM_CUDA_PATH=" + requested + " is not one of auto, ipc, staging");
  COMM_CHECK(requested != "ipc" || one_host, InvalidArgumentError, context,
             std::string("COMM_CUDA_PATH=ipc, but this group's peers are reached over ") + transport_name() +
                 ": CUDA IPC needs every rank on one host; unset it to stage through host memory");
  GpuPath path = requested == "staging" || !one_host ? GpuPath::Staging : GpuPath::Ipc;
  std::string why = requested != "auto" ? "COMM_CUDA_PATH=" + requested
                    : one_host          ? std::string("every rank on this host")
                                        : std::string("peers reached over ") + transport_name();
  log::get(log::Subsystem::Cuda)
      .info("GPU buffers of group {} go {} ({})", layout_.id,
            path == GpuPath::Ipc ? "through CUDA IPC" : "staged through pinned host memory", why);
  gpu_path_ = path;
  return path;
}

bool ProcessGroup::shared_memory_usable() const { return size() == 1 || arena_ != nullptr; }

int ProcessGroup::transport_rank(int rank) const {
  return layout_.members.empty() ? rank : layout_.members[static_cast<std::size_t>(rank)];
}

std::uint64_t ProcessGroup::point_to_point_tag(int tag) const {
  // User tags are >= 0 ints (31 bits); the group id sits above them, below the collective bit.
  return (std::uint64_t{layout_.id & 0x7FFF} << algorithms::kGroupIdShift) | static_cast<std::uint64_t>(tag);
}

void ProcessGroup::check_member(const char* op) const {
  COMM_CHECK(rank() >= 0, InvalidArgumentError, ErrorContext{.op = op},
             "this process is not a member of group '" + name() +
                 "' (it was left out of the ranks passed to new_group); only members may use the group");
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks) {
  const char* op = "new_group";
  check_member(op);
  ErrorContext context{.rank = rank(), .op = op};
  COMM_CHECK(!ranks.empty(), InvalidArgumentError, context, "the list of ranks is empty; a group needs at least one");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    COMM_CHECK(ranks[i] >= 0 && ranks[i] < size(), InvalidArgumentError, context,
               "rank " + std::to_string(ranks[i]) + " is not in this group of " + std::to_string(size()) + " ranks");
    COMM_CHECK(std::count(ranks.begin(), ranks.end(), ranks[i]) == 1, InvalidArgumentError, context,
               "rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  // Every member of this group calls new_group in the same order, so the n-th child has the same
  // id everywhere; mixing in the parent's id keeps grandchildren apart from children.
  std::uint64_t mix = (std::uint64_t{layout_.id} << 32 | ++groups_created_) * 0x9E3779B97F4A7C15ull;
  auto id = static_cast<std::uint32_t>((mix >> 40) % 0x7FFF) + 1;
  Layout layout{id, {}};
  int position = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    layout.members.push_back(transport_rank(ranks[i]));
    if (ranks[i] == rank()) position = static_cast<int>(i);
  }
  Identity identity{position, static_cast<int>(ranks.size()), -1, -1, name() + "/group" + std::to_string(id)};
  return std::make_shared<ProcessGroup>(std::move(identity), store_, transport_, timeout_, std::move(layout));
}

}  // namespace comm
