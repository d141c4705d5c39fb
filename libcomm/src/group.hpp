// ProcessGroup::Impl: what a process group is inside the library. The public ProcessGroup
// hands every call here as one Call value (process_group.cpp); the work is spread by
// responsibility:
//   group.cpp                  making groups (init, new_group)
//   group_recovery.cpp         revoke and shrink: going on without a dead rank
//   group_growth.cpp           grow: newcomers joining a running group
//   call_pipeline.cpp          the one path of every collective: checked, its algorithm chosen,
//                              numbered, then run here or queued (a Work); the tuner query
//   call_checks.cpp            every check of a caller's arguments, before anything starts
//   point_to_point.cpp         send/recv of host buffers (point_to_point.hpp)
//   device_point_to_point.cpp  send/recv of GPU buffers (per-peer lanes)
//   group_devices.cpp          how the group moves GPU buffers (IPC or staging)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/choice_cache.hpp"
#include "algorithms/collective_context.hpp"
#include "algorithms/device/device_table.hpp"
#include "algorithms/hierarchical.hpp"
#include "algorithms/scratch.hpp"
#include "algorithms/tuner.hpp"
#include "comm/call.hpp"
#include "comm/process_group.hpp"
#include "libcomm/base/algorithm.hpp"
#include "libcomm/src/call_checks.hpp"
#include "libcomm/src/collective_queue.hpp"
#include "libcomm/src/completion_work.hpp"
#include "libcomm/src/group_devices.hpp"
#include "libcomm/src/group_layout.hpp"
#include "libcomm/src/hang_watch.hpp"
#include "libcomm/src/point_to_point.hpp"
#include "libcomm/src/trace_dump.hpp"
#include "transport/transport.hpp"

namespace comm {

class MulticastDiscovery;
struct WorldPlace;

// Where the first error while making the group with this id is published (rendezvous/join.hpp).
inline std::string join_failure_key(std::uint32_t group_id) { return "failure/" + std::to_string(group_id); }

// Throws PeerClosedError naming the first member (a group rank) the transport has lost, saying
// it happened while `phase`, unless `excused` says that member may have left (it finished its
// part). For the waits of making a group, which would otherwise last until the timeout.
void check_members_alive(transport::Transport& transport, const std::vector<int>& members, int size, int rank,
                         const std::string& phase, const std::function<bool(int)>& excused = {});

class ProcessGroup::Impl {
 public:
  struct Identity {
    int rank = 0;
    int size = 1;
    int local_rank = -1;  // from LOCAL_RANK and the like; -1 when no launcher said
    int local_size = -1;
    std::string name{};      // the store prefix of this group
    std::string job_name{};  // the prefix of the job's groups in the store (the world's name)
  };

  // Collective over the group's members when the transport can map a shared segment (every
  // member constructs its group at the same point: init_process_group, new_group).
  Impl(Identity identity, std::shared_ptr<Store> store, std::shared_ptr<transport::Transport> transport,
       std::chrono::milliseconds timeout, GroupLayout layout = {});
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const Identity& identity() const { return identity_; }
  int rank() const { return identity_.rank; }
  int size() const { return identity_.size; }
  const std::string& name() const { return identity_.name; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Store& store() const { return *store_; }
  const char* transport_name() const { return transport_->medium(); }
  bool shared_memory_usable() const { return size() == 1 || arena_ != nullptr; }
  Algorithm algorithm_for(Collective collective, std::size_t bytes, Algorithm requested) const;
  // The algorithm and its chunks (algorithms/tuner.hpp).
  algorithms::Choice choose(Collective collective, std::size_t bytes, Algorithm requested) const;
  // Collective, once, on the world group of a job that spans hosts: the link between them, from
  // COMM_LINK_GBPS or measured (algorithms/link_model.hpp). Groups made from it inherit it.
  void read_link();
  // The same moment: this host's steady clock against rank 0's (algorithms/clock_probe.hpp).
  void read_clock_offset();
  // `key`: made by its members only (see ProcessGroup::new_group); none: by every rank, in order.
  // `timeout`: the child's, else this group's.
  std::unique_ptr<Impl> new_group(std::vector<int> ranks, std::optional<std::string> key = std::nullopt,
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void abort();
  // ProcessGroup::revoke: this group's calls fail on every member (transport.hpp's revoke).
  void revoke(const std::string& reason);
  // ProcessGroup::shrink (group_recovery.cpp).
  std::unique_ptr<Impl> shrink(const std::vector<int>& exclude);
  // ProcessGroup::grow (group_growth.cpp).
  std::shared_ptr<ProcessGroup> grow(int count);
  // The world group of a new transport (make_world.hpp): init_process_group's, a grown group's.
  static std::shared_ptr<ProcessGroup> make_world(const WorldPlace& place,
                                                  std::unique_ptr<MulticastDiscovery>* discovery = nullptr);
  const std::string& job_name() const { return identity_.job_name.empty() ? identity_.name : identity_.job_name; }
  // Throws why this group was revoked, if it was (one load when no group of the transport was).
  void check_not_revoked(Collective collective) const {
    if (transport_->revoked_any()) [[unlikely]]
      throw_if_revoked(to_string(collective), -1);
  }
  void set_cuda_stream(void* stream) { devices_.set_stream(stream); }
  void* cuda_stream() const { return devices_.stream(); }

  // Every call, collective or point to point, on host or GPU buffers: start gives its Work (the
  // i-form); run is the same call waited on, here when nothing is queued before it (no hand-off,
  // no allocation), and returns a recv's source rank (else -1).
  std::shared_ptr<Work> start(const Call& call);
  int run(const Call& call);
  // A collective checked, its algorithm chosen, fingerprinted: ready to run, any number of
  // times (call_pipeline.cpp). Each run is numbered as it starts. A host entry of the algorithm
  // table runs it, or a GPU path's entry.
  struct ReadyCall {
    algorithms::HostCall call;
    algorithms::HostEntryPoint host = nullptr;  // null: a GPU call
    algorithms::Resources resources{};
    algorithms::DeviceEntryPoint device = nullptr;
    algorithms::DeviceResources device_resources{};
    int device_index = -1;
    std::uint64_t fingerprint = 0;
    bool confirm = false;  // the algorithm's Hearing is Partial: confirm_call after it
    Algorithm algorithm = Algorithm::Auto;  // the one chosen
  };
  ReadyCall make_ready(const Call& call);
  // One run of a ready call: waited on here, or queued behind the group's earlier calls (its
  // Work), which then owns the ReadyCall, or shares it with a persistent call
  // (prepared_call.cpp).
  void run_ready(const ReadyCall& ready) {
    std::uint64_t sequence = next_sequence(ready.call.collective);
    queue_->run([&] { execute(ready, sequence, {}); });
  }
  std::shared_ptr<Work> start_ready(ReadyCall ready) { return queue_run(std::move(ready)); }
  std::shared_ptr<Work> start_ready(std::shared_ptr<const ReadyCall> ready) { return queue_run(std::move(ready)); }
  // Ends with this group: a prepared call that outlives its group finds it expired.
  std::weak_ptr<const int> lifetime() const { return lifetime_; }
  // The blocking send and recv without a Call (point_to_point.hpp): every small message.
  void send(const Buffer& buffer, int dst, int tag) { point_to_point_.send(buffer, dst, tag); }
  int recv(const Buffer& buffer, int src, int tag) { return point_to_point_.recv(buffer, src, tag); }
  // new_group, shrink and grow as the flight recorder's entries of this group: `body` run, its
  // entry finished as it ends.
  template <class Body>
  auto traced(trace::Event event, std::size_t count, Body&& body) {
    trace::Handle entry =
        trace::begin(trace_group_, static_cast<std::uint8_t>(event), 0, count, -1, 0, -1, trace::kStartedQueued);
    try {
      auto made = body();
      entry.finish(trace::State::Completed);
      return made;
    } catch (const std::exception& error) {
      trace::end_with_error(entry, error);
      throw;
    }
  }

 private:
  // Collective over the members: the shared-memory collectives' segment, through the store.
  void map_arena();
  void throw_if_revoked(const char* op, std::int64_t sequence) const;
  // Shrink and grow on a transport that stopped (abort(), a mismatch) make no group: every
  // peer looks dead there, so an agreement would hand each rank a group of itself alone.
  void throw_if_stopped(const char* op) const;
  // grow's steps (group_growth.cpp): the generation rank 0 announces; a failed growth told to
  // the newcomers that took a place of it.
  std::uint64_t wait_for_announcement(const std::string& announcement, const char* op);
  void publish_growth_failure(const std::string& announcement, std::uint64_t generation, const Error& error,
                              int grown_size);
  // A run's number in the group (after the revocation check).
  std::uint64_t next_sequence(Collective collective) {
    check_not_revoked(collective);
    return collective_sequence_++;
  }
  // `keep`: a ReadyCall, or a pointer to one; held until the queued run ends.
  template <class Keep>
  std::shared_ptr<Work> queue_run(Keep keep);
  // Runs the call's algorithm as run `sequence` of the group; a failure aborts the group, so
  // peers stop waiting. `entry`: its flight recorder entry when it was queued (else made here).
  void execute(const ReadyCall& ready, std::uint64_t sequence, trace::Handle entry);
  trace::Handle begin_trace(const ReadyCall& ready, std::uint64_t sequence, std::uint8_t flags) const;

  Identity identity_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<transport::Transport> transport_;
  std::chrono::milliseconds timeout_;
  GroupLayout layout_;
  std::atomic<std::uint64_t> collective_sequence_{0};
  algorithms::ChoiceCache choices_;
  std::uint32_t groups_created_ = 0;
  std::uint32_t shrinks_ = 0;  // shrink calls so far: the same count on every survivor
  std::uint32_t grows_ = 0;    // grow calls so far: the same count on every member
  // How the job's transport was made (InitOptions::transport, job_secret): a grown group's
  // ranks connect the same way, the newcomers with them. Inherited by the groups made from it.
  std::string medium_choice_ = "auto";
  std::optional<std::string> job_secret_{};
  // The job's group namespace in the store ("default_pg", InitOptions::join names it): growth
  // records live there, whichever group grows, so that newcomers find them.
  std::shared_ptr<Store> job_store_;
  std::set<std::uint32_t> child_ids_;                 // of the groups made from this one: an id is never reused
  std::unique_ptr<algorithms::ScratchPool> scratch_;  // the collectives' temporary memory
  std::unique_ptr<transport::SharedArena> arena_;     // shared-memory collectives' segment; null: none
  // The group's ranks by host (for the hierarchical algorithms); usable() only across hosts.
  algorithms::HostLayout host_layout_;
  algorithms::LinkModel link_;  // unknown on one host
  std::uint16_t trace_group_ = 0;  // this group's index in the flight recorder
  CallChecks checks_;
  GroupDevices devices_;
  PointToPoint point_to_point_;
  std::unique_ptr<HangWatch> hang_watch_;           // null for a group of one, or a non-member
  std::shared_ptr<const int> lifetime_ = std::make_shared<const int>(0);
  std::unique_ptr<detail::CollectiveQueue> queue_;  // last: its worker may use the members above
};

}  // namespace comm
