// Making groups (the world's, new_group's), and what the tuner picks for them. The calls themselves are in the files
// group.hpp lists.
#include "libcomm/src/group.hpp"

#include <algorithm>
#include <string>

#include "algorithms/clock_probe.hpp"
#include "algorithms/link_model.hpp"
#include "algorithms/tuner.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/trace_dump.hpp"
#include "rendezvous/join.hpp"
#include "transport/shared_arena.hpp"
#include "transport/watched_store.hpp"

namespace comm {

ProcessGroup::Impl::Impl(Identity identity, std::shared_ptr<Store> store,
                         std::shared_ptr<transport::Transport> transport, std::chrono::milliseconds timeout,
                         GroupLayout layout)
    : identity_(std::move(identity)),
      store_(std::move(store)),
      transport_(std::move(transport)),
      timeout_(timeout),
      layout_(std::move(layout)),
      scratch_(std::make_unique<algorithms::ScratchPool>()),
      checks_(rank(), size(), name(), layout_.members.empty()),
      devices_(rank(), size(), layout_.id, *transport_),
      point_to_point_(rank(), timeout_, layout_, *transport_, checks_, devices_),
      queue_(std::make_unique<detail::CollectiveQueue>()) {
  trace::FlightRecorder& recorder = trace::start();
  // A member lost revokes the group (its calls fail on every member, which may then shrink it).
  if (rank() >= 0 && size() > 1) {
    std::vector<int> members(static_cast<std::size_t>(size()));
    for (int member = 0; member < size(); ++member)
      members[static_cast<std::size_t>(member)] = layout_.transport_rank(member);
    transport_->groups().add_group(layout_.id, std::move(members));
  }
  // Every member constructs the group at the same point (init_process_group, new_group), so the
  // segment of the shared-memory collectives is made here, collectively.
  if (rank() >= 0 && size() > 1) {
    host_layout_ = algorithms::HostLayout(transport_->hosts(), layout_.members, rank(), size());
    if (layout_.shared_segment) map_arena();
    hang_watch_ = std::make_unique<HangWatch>(HangWatch::Placement{store_, "hang/" + std::to_string(layout_.id) + "/",
                                                                   name(), rank(), size(), layout_.members},
                                              HangWatch::threshold_from_environment());
  }
  if (trace::FlightRecorder::active() != nullptr) {
    trace_group_ = recorder.add_group({.id = layout_.id,
                                       .name = name(),
                                       .job = job_name(),
                                       .rank = rank(),
                                       .size = size(),
                                       .world_ranks = layout_.members,
                                       .medium = transport_->medium(),
                                       .now = hang_watch_ ? std::function<trace::GroupInfo::Now()>([watch = hang_watch_.get()] {
                                         auto now = watch->record().read();
                                         return trace::GroupInfo::Now{now.in_call, now.sequence, now.waiting_peer};
                                       })
                                                          : nullptr});
    point_to_point_.trace_as(trace_group_);
  }
}

namespace {

// The piece size of the shared-memory collectives (rank 0's is the group's): larger pieces mean
// fewer meetings of all ranks per call, smaller ones keep a piece's slots in the caches.
std::size_t shared_memory_slot_bytes() {
  auto bytes =
      environment::get_integer_in("COMM_SHM_SLOT_BYTES", static_cast<long long>(transport::SharedArena::kMinSlotBytes),
                                  static_cast<long long>(transport::SharedArena::kMaxSlotBytes),
                                  "bytes of one piece of a shared-memory collective");
  if (!bytes) return transport::SharedArena::kSlotBytes;
  if (*bytes % static_cast<long long>(transport::SharedArena::kMinSlotBytes) != 0) {
    throw InvalidArgumentError("environment variable COMM_SHM_SLOT_BYTES=" + std::to_string(*bytes) +
                               " is not a multiple of 4096; give whole pages, or unset it for the default (262144)");
  }
  return static_cast<std::size_t>(*bytes);
}

}  // namespace

void ProcessGroup::Impl::map_arena() {
  // A member that dies meanwhile is named at once, not after the timeout.
  transport::WatchedStore watched(*store_, [this] {
    std::string key = join_failure_key(layout_.id);
    throw_if_join_failed_or_store_lost(*store_, key, rank(), size());
    try {
      check_members_alive(*transport_, layout_.members, size(), rank(),
                          layout_.id == 0 ? std::string("the shared-memory segment of the collectives was being set up")
                                          : "the shared-memory segment of group " + name() + " was being set up");
    } catch (const Error& error) {
      fail_join(*store_, key, error, rank(), size());
    }
  });
  arena_ = transport_->map_shared_arena(watched, "arena/" + std::to_string(layout_.id), rank(), size(), timeout_,
                                        shared_memory_slot_bytes());
}

ProcessGroup::Impl::~Impl() {
  if (trace::FlightRecorder* recorder = trace::FlightRecorder::active()) recorder->group_gone(trace_group_);
  if (rank() >= 0 && size() > 1) transport_->groups().remove_group(layout_.id);
}

void check_members_alive(transport::Transport& transport, const std::vector<int>& members, int size, int rank,
                         const std::string& phase, const std::function<bool(int)>& excused) {
  for (int member = 0; member < size; ++member) {
    int peer = members.empty() ? member : members[static_cast<std::size_t>(member)];
    auto failure = transport.failure(peer);
    if (!failure || (excused && excused(member))) continue;
    std::string cause = "its connection failed";
    int named = peer;  // as the world numbers it, like the transport's own messages
    try {
      std::rethrow_exception(failure);
    } catch (const Error& error) {
      cause = error.message();
      // A peer that stopped because of another rank relays that rank's error: name the cause.
      if (error.peer() >= 0 && error.peer() != peer) named = error.peer();
    } catch (const std::exception& error) {
      cause = error.what();
    }
    throw PeerClosedError("rank " + std::to_string(named) + " died while " + phase + " (" + cause +
                              "); the other ranks stop here instead of waiting out the timeout",
                          ErrorContext{.rank = rank, .peer = named, .op = "init_process_group"});
  }
}

void ProcessGroup::Impl::abort() {
  transport_->abort("ProcessGroup::abort() was called on rank " + std::to_string(rank()));
}

namespace {

// The tag slot of the link probe: the last sequence number, which the group's own calls reach
// only after 2^32 of them, long after the probe's messages are gone.
constexpr std::uint64_t kLinkProbeSequence = 0xFFFFFFFF;
constexpr std::uint64_t kClockProbeSequence = 0xFFFFFFFE;  // the same, for the clocks' probe

}  // namespace

// Every rank of a job that spans hosts: how far its host's clock is from rank 0's, for the
// flight recorder's merged timeline (measured whether or not the recorder is on here: it is
// collective, and COMM_TRACE may differ between ranks).
void ProcessGroup::Impl::read_clock_offset() {
  std::span<const int> transport_hosts = transport_->hosts();
  if (transport_hosts.empty()) return;
  std::vector<int> host_of(static_cast<std::size_t>(size()));
  for (int member = 0; member < size(); ++member)
    host_of[static_cast<std::size_t>(member)] = transport_hosts[static_cast<std::size_t>(layout_.transport_rank(member))];
  algorithms::CollectiveContext context{
      *transport_,
      rank(),
      size(),
      kClockProbeSequence,
      timeout_,
      "init_process_group (comparing the hosts' clocks)",
      layout_.id,
      layout_.members,
      0,
      detail::fingerprint({.collective = static_cast<int>(Collective::Barrier), .algorithm = Algorithm::Direct}),
      scratch_.get()};
  algorithms::ClockOffset offset;
  try {
    offset = algorithms::probe_clock_offset(context, host_of);
  } catch (Error& error) {
    transport_->abort(error.what(), &error);
    throw;
  }
  if (trace::FlightRecorder* recorder = trace::FlightRecorder::active())
    recorder->set_clock_offset(offset.offset_ns, offset.error_ns);
  log::get(log::Subsystem::Group)
      .info("this host's steady clock is {:.1f} us behind rank 0's (within {:.1f} us)", offset.offset_ns / 1e3,
            offset.error_ns / 1e3);
}

void ProcessGroup::Impl::read_link() {
  if (rank() < 0 || host_layout_.spanned_hosts() < 2) return;
  if (auto given = algorithms::link_from_environment()) {
    link_ = *given;
  } else {
    // In a slot of its own, outside the numbering of the group's calls: the user's first
    // collective stays #0 in what errors and the hang watch say.
    algorithms::CollectiveContext context{
        *transport_,
        rank(),
        size(),
        kLinkProbeSequence,
        timeout_,
        "init_process_group (measuring the link between hosts)",
        layout_.id,
        layout_.members,
        0,
        detail::fingerprint({.collective = static_cast<int>(Collective::Barrier), .algorithm = Algorithm::Direct}),
        scratch_.get()};
    try {
      link_ = algorithms::probe_link(context, host_layout_.first_remote_rank());
    } catch (Error& error) {
      // As a failed collective does: the peers stop waiting for this rank.
      transport_->abort(error.what(), &error);
      throw;
    }
  }
  read_clock_offset();
  choices_.clear();  // any answer so far was the tuner's without the link
  log::get(log::Subsystem::Algorithms)
      .info(
          "link between hosts ({} hosts): {:.3g} GB/s each way, {:.3g} us per message ({}); rings across it "
          "pipeline {} KiB chunks",
          host_layout_.spanned_hosts(), link_.bytes_per_second / 1e9, link_.latency_seconds * 1e6, link_.source,
          algorithms::link_chunk_bytes(link_) / 1024);
}

std::unique_ptr<ProcessGroup::Impl> ProcessGroup::Impl::new_group(std::vector<int> ranks,
                                                                  std::optional<std::string> key,
                                                                  std::optional<std::chrono::milliseconds> timeout) {
  const char* op = "new_group";
  checks_.check_member(op);
  ErrorContext context{.rank = rank(), .op = op};
  COMM_CHECK(!ranks.empty(), InvalidArgumentError, context, "the list of ranks is empty; a group needs at least one");
  COMM_CHECK(!timeout || timeout->count() > 0, InvalidArgumentError, context,
             "the timeout must be positive, got " + std::to_string(timeout ? timeout->count() : 0) + " ms");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    COMM_CHECK(ranks[i] >= 0 && ranks[i] < size(), InvalidArgumentError, context,
               "rank " + std::to_string(ranks[i]) + " is not in this group of " + std::to_string(size()) + " ranks");
    COMM_CHECK(std::count(ranks.begin(), ranks.end(), ranks[i]) == 1, InvalidArgumentError, context,
               "rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  if (key) {
    COMM_CHECK(std::find(ranks.begin(), ranks.end(), rank()) != ranks.end(), InvalidArgumentError, context,
               "a group made by key is made by its members only, and this rank is not in it");
    COMM_CHECK(!key->empty(), InvalidArgumentError, context, "the group's key is empty");
  }
  // Without a key every member of this group calls new_group in the same order, so the n-th child
  // has the same id everywhere; with one, the key names it (FNV-1a: the same in every process).
  // Mixing in the parent's id keeps grandchildren apart from children.
  std::uint64_t naming = 0;
  if (key) {  // the others do not count this group
    naming = 0xCBF29CE484222325ull;
    for (unsigned char c : *key) naming = (naming ^ c) * 0x100000001B3ull;
  } else {
    naming = ++groups_created_;
  }
  std::uint64_t mix = (std::uint64_t{layout_.id} << 32 ^ naming) * 0x9E3779B97F4A7C15ull;
  auto id = static_cast<std::uint32_t>((mix >> 40) % 0x7FFF) + 1;
  // Two live groups of one id would share tags: refused on every member alike (the id depends
  // only on what they all pass).
  COMM_CHECK(id != layout_.id && child_ids_.insert(id).second, InvalidArgumentError, context,
             "this group already made a group whose internal id (" + std::to_string(id) + ") is the one " +
                 (key ? "key '" + *key + "'" : std::string("this new_group call")) +
                 " lands on; use another key (or fewer groups)");
  GroupLayout layout{id, {}};
  int position = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    layout.members.push_back(layout_.transport_rank(ranks[i]));
    if (ranks[i] == rank()) position = static_cast<int>(i);
  }
  Identity identity{position, static_cast<int>(ranks.size()),         -1,
                    -1,       name() + "/group" + std::to_string(id), job_name()};
  try {
    auto child =
        std::make_unique<Impl>(std::move(identity), store_, transport_, timeout.value_or(timeout_), std::move(layout));
    child->link_ = link_;
    child->medium_choice_ = medium_choice_;
    child->job_secret_ = job_secret_;
    child->job_store_ = job_store_;
    return child;
  } catch (const Error& error) {
    if (position < 0 || ranks.size() == 1) throw;
    try {
      fail_join(*store_, join_failure_key(id), error, position, static_cast<int>(ranks.size()));
    } catch (Error& first) {
      // The transport is the parent's too, and a member is gone: stop it, so that ranks outside
      // this group, waiting in the parent's calls, hear the cause rather than a rank leaving.
      transport_->abort(first.what(), &first);
      throw;
    }
  }
}

}  // namespace comm
