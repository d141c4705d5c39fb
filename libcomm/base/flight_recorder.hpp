// The flight recorder: what every call of this process did lately, kept in one bounded ring so
// that a hang, an error or a signal can be answered with a dump (trace_dump.hpp) naming, for
// each call, its group, sequence number, operation, shape, algorithm, peer, when it was queued,
// started and completed, and how it ended.
//
// On by default: COMM_TRACE is the number of entries kept (default 4096, 0: off). The calling
// thread claims an entry with one atomic add and writes it with plain stores: no allocation, no
// lock, nothing shared with the progress thread. A dump copies entries under a per-entry
// sequence check (`id` is 0 while an entry is written), so it never reads a torn one; an entry
// the ring reuses while its call still runs is simply no longer finished by it (its handle's id
// no longer matches).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libcomm/base/ticks.hpp"

namespace comm::trace {

enum class State : std::uint8_t { Running = 0, Completed = 1, Failed = 2, Revoked = 3 };

// What an entry records: a comm::Operation's value (libcomm/src names them), or one of these.
enum class Event : std::uint8_t { NewGroup = 64, Shrink = 65, Grow = 66 };

struct Entry {
  std::atomic<std::uint64_t> id{0};  // 0 while being written; else the call's number in the process (from 1)
  std::uint64_t sequence = 0;        // a collective's number in its group; a transfer's tag
  std::uint64_t count = 0;           // elements
  std::int64_t queued = 0;           // ticks
  std::atomic<std::int64_t> started{0};   // ticks; 0: not started (or, for kStartedQueued, = queued)
  std::atomic<std::uint64_t> finish{0};   // ticks << 2 | State; 0: still running
  std::uint16_t group = 0;           // index in the recorder's groups
  std::uint8_t operation = 0;        // comm::Operation or Event
  std::int8_t dtype = -1;            // comm::DType, or -1 (no buffer)
  std::uint8_t algorithm = 0;        // comm::Algorithm
  std::uint8_t flags = 0;
  std::int32_t peer = -1;            // a root or a transfer's peer (group rank); -1: none / any source
};
static_assert(sizeof(Entry) == 64);

// An entry as a dump reads it: a plain copy.
struct Recorded {
  std::uint64_t id = 0;
  std::uint64_t sequence = 0;
  std::uint64_t count = 0;
  std::int64_t queued = 0;
  std::int64_t started = 0;
  std::uint64_t finish = 0;
  std::uint16_t group = 0;
  std::uint8_t operation = 0;
  std::int8_t dtype = -1;
  std::uint8_t algorithm = 0;
  std::uint8_t flags = 0;
  std::int32_t peer = -1;
};
inline constexpr std::uint8_t kStartedQueued = 1;  // started when queued (a blocking call)

// A call's entry as its caller holds it: finishes the entry unless the ring reused it meanwhile.
class Handle {
 public:
  Handle() = default;
  Handle(Entry* entry, std::uint64_t id, bool counter) : entry_(entry), id_(id), counter_(counter) {}
  explicit operator bool() const { return entry_ != nullptr; }
  void start() const {
    if (entry_ != nullptr && entry_->id.load(std::memory_order_relaxed) == id_)
      entry_->started.store(detail::ticks(counter_), std::memory_order_relaxed);
  }
  void finish(State state) const {
    if (entry_ != nullptr && entry_->id.load(std::memory_order_relaxed) == id_) {
      entry_->finish.store(static_cast<std::uint64_t>(detail::ticks(counter_)) << 2 | static_cast<std::uint8_t>(state),
                           std::memory_order_release);
    }
  }
  // A failure's text is kept beside the ring (the last few); the state says failed or revoked.
  void fail(State state, const std::string& why) const;
  std::uint64_t id() const { return id_; }

 private:
  Entry* entry_ = nullptr;
  std::uint64_t id_ = 0;
  bool counter_ = false;
};

// One group as dumps name it.
struct GroupInfo {
  std::uint32_t id = 0;  // the group's id in its transport (GroupLayout::id)
  std::string name;
  std::string job;  // the job's name (the world group's store prefix)
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;  // group rank -> world rank (empty: the same)
  std::string medium;
  // The collective running now and the peer it waits on (the hang watch's record); filled in
  // copies only, from `now` (unset once the group is gone).
  struct Now {
    bool in_call = false;
    std::uint64_t call_sequence = 0;
    int waiting_peer = -1;  // group rank
  };
  std::function<Now()> now;
  Now live{};
};

// The ring and its writers' state. Members are read inline on every call.
class FlightRecorder {
 public:
  // A recorder of `entries` (rounded up to a power of two; 0: records nothing). The process's
  // own is instance(); tests make their own.
  explicit FlightRecorder(std::size_t entries);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;
  // The process's recorder, made with COMM_TRACE's size on first use (an invalid value is an
  // error then: the first group's init fails with it).
  static FlightRecorder& instance();
  // Null when tracing is off: the one load and branch a call pays then.
  static FlightRecorder* active() { return active_.load(std::memory_order_relaxed); }

  // A call's entry, queued now (and started, with kStartedQueued).
  Handle begin(std::uint16_t group, std::uint8_t operation, std::uint64_t sequence, std::uint64_t count,
               std::int8_t dtype, std::uint8_t algorithm, std::int32_t peer, std::uint8_t flags) {
    std::uint64_t id = 0;
    Entry& entry = write(id, group, operation, sequence, count, dtype, algorithm, peer, flags, detail::ticks(counter_), 0);
    return Handle(&entry, id, counter_);
  }

  // A call over when it is recorded (a small send the transport took at once): one write,
  // queued, started and completed now.
  void record_done(std::uint16_t group, std::uint8_t operation, std::uint64_t sequence, std::uint64_t count,
                   std::int8_t dtype, std::int32_t peer) {
    std::int64_t now = detail::ticks(counter_);
    std::uint64_t id = 0;
    write(id, group, operation, sequence, count, dtype, 0, peer, kStartedQueued, now,
          static_cast<std::uint64_t>(now) << 2 | static_cast<std::uint8_t>(State::Completed));
  }

  // Groups: registered when made (their index goes into entries), forgotten when gone (the
  // entry stays for dumps, without its live record).
  std::uint16_t add_group(GroupInfo info);
  void group_gone(std::uint16_t group);

  // What dumps read.
  struct Copy {
    std::vector<Recorded> entries;  // oldest first
    std::vector<GroupInfo> groups;
    std::vector<std::pair<std::uint64_t, std::string>> failures;  // entry id -> why
    detail::TickScale scale;
    std::int64_t wall_anchor_ns = 0;    // system clock at start-up, ns since the epoch ...
    std::int64_t steady_anchor_ns = 0;  // ... at this steady-clock reading
    bool clock_offset_known = false;    // set_clock_offset's figures
    std::int64_t clock_offset_ns = 0;
    std::int64_t clock_error_ns = 0;
    std::size_t capacity = 0;
  };
  Copy copy() const;
  void note_failure(std::uint64_t id, const std::string& why);
  // This host's steady clock against the world's rank 0's, measured when a world group that
  // spans hosts was made (algorithms/clock_probe.hpp); dumps carry it for merging.
  void set_clock_offset(std::int64_t offset_ns, std::int64_t error_ns) {
    clock_error_ns_.store(error_ns, std::memory_order_relaxed);
    clock_offset_ns_.store(offset_ns, std::memory_order_release);
    clock_offset_known_.store(true, std::memory_order_release);
  }
  std::size_t capacity() const { return mask_ + 1; }

 private:
  static std::atomic<FlightRecorder*> active_;

  // Claims the next entry (its number into `id`) and fills it, under the entry's sequence
  // check: `id` is 0 while the fields change, so a dump never copies half of one.
  Entry& write(std::uint64_t& id, std::uint16_t group, std::uint8_t operation, std::uint64_t sequence,
               std::uint64_t count, std::int8_t dtype, std::uint8_t algorithm, std::int32_t peer, std::uint8_t flags,
               std::int64_t queued, std::uint64_t finish) {
    id = next_.fetch_add(1, std::memory_order_relaxed) + 1;
    Entry& entry = entries_[id & mask_];
    entry.id.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // a reader that sees the fields new sees id 0
    entry.sequence = sequence;
    entry.count = count;
    entry.queued = queued;
    if ((flags & kStartedQueued) == 0) entry.started.store(0, std::memory_order_relaxed);
    entry.finish.store(finish, std::memory_order_relaxed);
    entry.group = group;
    entry.operation = operation;
    entry.dtype = dtype;
    entry.algorithm = algorithm;
    entry.flags = flags;
    entry.peer = peer;
    entry.id.store(id, std::memory_order_release);
    return entry;
  }

  std::unique_ptr<Entry[]> entries_;
  std::uint64_t mask_ = 0;
  bool counter_ = false;
  std::atomic<std::uint64_t> next_{0};
  std::int64_t start_ticks_ = 0;
  std::int64_t start_steady_ns_ = 0;
  std::int64_t start_wall_ns_ = 0;
  std::atomic<bool> clock_offset_known_{false};
  std::atomic<std::int64_t> clock_offset_ns_{0};
  std::atomic<std::int64_t> clock_error_ns_{0};
  struct Shared;  // the groups and failure texts, under a mutex (never on a call's path)
  std::unique_ptr<Shared> shared_;
};

// The group's handle on the recorder: begins entries for it when tracing is on.
inline Handle begin(std::uint16_t group, std::uint8_t operation, std::uint64_t sequence, std::uint64_t count,
                    std::int8_t dtype, std::uint8_t algorithm, std::int32_t peer, std::uint8_t flags) {
  FlightRecorder* recorder = FlightRecorder::active();
  if (recorder == nullptr) return {};
  return recorder->begin(group, operation, sequence, count, dtype, algorithm, peer, flags);
}

inline void record_done(std::uint16_t group, std::uint8_t operation, std::uint64_t sequence, std::uint64_t count,
                        std::int8_t dtype, std::int32_t peer) {
  if (FlightRecorder* recorder = FlightRecorder::active()) recorder->record_done(group, operation, sequence, count, dtype, peer);
}

const char* to_string(State state);

}  // namespace comm::trace
