#include "libcomm/base/flight_recorder.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <deque>
#include <mutex>

#include "comm/error.hpp"
#include "libcomm/base/environment.hpp"

namespace comm::trace {

namespace {

constexpr std::size_t kDefaultEntries = 4096;
constexpr std::size_t kMostEntries = std::size_t{1} << 24;  // 1 GiB of ring at 64 bytes each
constexpr std::size_t kFailuresKept = 64;

}  // namespace

struct FlightRecorder::Shared {
  std::mutex mutex;
  std::vector<GroupInfo> groups;
  std::deque<std::pair<std::uint64_t, std::string>> failures;
};

std::atomic<FlightRecorder*> FlightRecorder::active_{nullptr};

FlightRecorder::FlightRecorder(std::size_t entries) : shared_(std::make_unique<Shared>()) {
  counter_ = detail::ticks_are_counter();
  start_steady_ns_ = detail::steady_nanoseconds();
  start_ticks_ = detail::ticks(counter_);
  start_wall_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (entries == 0) return;
  std::size_t size = std::bit_ceil(entries);
  entries_ = std::make_unique<Entry[]>(size);
  mask_ = size - 1;
}

FlightRecorder::~FlightRecorder() = default;

FlightRecorder& FlightRecorder::instance() {
  // Never destroyed: calls on other threads (and dumps at exit) may run past static destruction.
  static FlightRecorder* recorder = [] {
    auto entries = environment::get_integer_in("COMM_TRACE", 0, static_cast<long long>(kMostEntries),
                                               "entries the flight recorder keeps (0: off)");
    auto* made = new FlightRecorder(entries ? static_cast<std::size_t>(*entries) : kDefaultEntries);  // NOLINT: leaked on purpose
    if (made->entries_) active_.store(made, std::memory_order_release);
    return made;
  }();
  return *recorder;
}

std::uint16_t FlightRecorder::add_group(GroupInfo info) {
  std::lock_guard lock(shared_->mutex);
  // Past 65,535 groups in one process the last index is shared (their entries name it).
  shared_->groups.push_back(std::move(info));
  return static_cast<std::uint16_t>(std::min<std::size_t>(shared_->groups.size() - 1, 0xFFFF));
}

void FlightRecorder::group_gone(std::uint16_t group) {
  std::lock_guard lock(shared_->mutex);
  if (group < shared_->groups.size()) shared_->groups[group].now = nullptr;
}

void FlightRecorder::note_failure(std::uint64_t id, const std::string& why) {
  std::lock_guard lock(shared_->mutex);
  shared_->failures.emplace_back(id, why);
  if (shared_->failures.size() > kFailuresKept) shared_->failures.pop_front();
}

FlightRecorder::Copy FlightRecorder::copy() const {
  Copy copy;
  copy.capacity = entries_ ? mask_ + 1 : 0;
  copy.scale = detail::TickScale(counter_, start_ticks_, start_steady_ns_);
  copy.wall_anchor_ns = start_wall_ns_;
  copy.steady_anchor_ns = start_steady_ns_;
  copy.clock_offset_known = clock_offset_known_.load(std::memory_order_acquire);
  copy.clock_offset_ns = clock_offset_ns_.load(std::memory_order_relaxed);
  copy.clock_error_ns = clock_error_ns_.load(std::memory_order_relaxed);
  if (entries_) {
    std::uint64_t last = next_.load(std::memory_order_acquire);
    std::uint64_t first = last > mask_ ? last - mask_ : 1;
    copy.entries.reserve(static_cast<std::size_t>(last - first + 1));
    for (std::uint64_t id = first; id <= last; ++id) {
      const Entry& entry = entries_[id & mask_];
      // A sequence check per entry: one being rewritten right now is left out.
      for (int attempt = 0; attempt < 3; ++attempt) {
        std::uint64_t before = entry.id.load(std::memory_order_acquire);
        if (before != id) break;  // being written, or reused by a newer call already
        Recorded& out = copy.entries.emplace_back();
        out.id = id;
        out.sequence = entry.sequence;
        out.count = entry.count;
        out.queued = entry.queued;
        out.started = entry.started.load(std::memory_order_relaxed);
        out.finish = entry.finish.load(std::memory_order_acquire);
        out.group = entry.group;
        out.operation = entry.operation;
        out.dtype = entry.dtype;
        out.algorithm = entry.algorithm;
        out.flags = entry.flags;
        out.peer = entry.peer;
        std::atomic_thread_fence(std::memory_order_acquire);
        if (entry.id.load(std::memory_order_relaxed) == before) break;
        copy.entries.pop_back();
      }
    }
  }
  std::lock_guard lock(shared_->mutex);
  copy.groups = shared_->groups;
  for (auto& group : copy.groups) {
    if (group.now) group.live = group.now();
    group.now = nullptr;
  }
  copy.failures.assign(shared_->failures.begin(), shared_->failures.end());
  return copy;
}

void Handle::fail(State state, const std::string& why) const {
  if (entry_ == nullptr || entry_->id.load(std::memory_order_relaxed) != id_) return;
  if (FlightRecorder* recorder = FlightRecorder::active()) recorder->note_failure(id_, why);
  finish(state);
}

const char* to_string(State state) {
  switch (state) {
    case State::Running: return "running";
    case State::Completed: return "completed";
    case State::Failed: return "failed";
    case State::Revoked: return "revoked";
  }
  return "unknown";
}

}  // namespace comm::trace
