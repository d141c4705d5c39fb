// The live hang verdict: when a collective has waited longer than COMM_HANG_REPORT seconds
// (default 60, 0: off), the ranks of its group compare notes through the store and each
// waiting rank logs one line saying where every rank is:
//   all_reduce #42 (float32 x 1048576, group default_pg) has waited 60 s: ranks 0-2,4-7 are in
//   all_reduce #42; rank 3 is in broadcast #41 (root 0) since 63 s
// A timeout of a collective carries the same verdict as its message. Ranks are named as the world
// group numbers them, in subgroups too.
//
// Cost: the calling thread writes a few words to memory per call (CallRecord; no clock read:
// the watch notes when a call changed) and two per wait (algorithms::WaitingOn); a thread per
// group wakes four times a second to look at them and once a second asks the store whether
// another rank wants this rank's record.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "comm/process_group.hpp"
#include "comm/store_interface.hpp"

namespace comm {

// What a collective call is, for people: its name, element type, count and root.
struct CallShape {
  Collective collective = Collective::Barrier;
  int dtype = -1;  // a DType, or -1 when the call has no buffer
  std::size_t count = 0;
  int root = -1;
};

// The current call of one group on this rank. One writer (the thread running the group's
// calls), read at any time by the watch: a sequence lock keeps the reader's copy consistent.
class CallRecord {
 public:
  struct Snapshot {
    bool in_call = false;
    CallShape shape{};
    std::uint64_t sequence = 0;                     // of the current call, or of the last one when idle
    bool any_call = false;                          // false until the first call starts
    std::chrono::steady_clock::time_point since{};  // when the call began, or the last one ended
                                                    // (as first seen: up to 250 ms late)
    int waiting_peer = -1;
    std::uint32_t waiting_step = 0;
  };

  CallRecord();
  void begin(const CallShape& shape, std::uint64_t sequence);
  void end();
  algorithms::WaitingOn* waiting() { return &waiting_; }
  Snapshot read() const;

 private:
  std::atomic<std::uint64_t> version_{0};
  std::atomic<bool> in_call_{false};
  std::atomic<bool> any_call_{false};
  std::atomic<int> collective_{0};
  std::atomic<int> dtype_{-1};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<int> root_{-1};
  std::atomic<std::uint64_t> sequence_{0};
  algorithms::WaitingOn waiting_;
  mutable std::mutex observe_mutex_;  // readers only: when they first saw the current version
  mutable std::uint64_t observed_version_ = 0;
  mutable std::chrono::steady_clock::time_point observed_since_;
};

class HangWatch {
 public:
  // Where a group is: its store (shared with its parent group: `key_prefix` keeps the records
  // apart), its name, and each group rank's world rank (empty: the same), which verdicts use.
  struct Placement {
    std::shared_ptr<Store> store;
    std::string key_prefix;  // "hang/<group id>/"
    std::string group;
    int rank = 0;
    int size = 1;
    std::vector<int> world_ranks{};
  };
  // threshold zero: no reports (records are still kept for timeout verdicts).
  HangWatch(Placement placement, std::chrono::seconds threshold);
  ~HangWatch();  // stops the thread
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  CallRecord& record() { return record_; }
  // The verdict on the current call, which has waited `waited`, gathered now (at most ~1.5 s):
  // for a timeout's message.
  std::string verdict_now(std::chrono::milliseconds waited);

  // COMM_HANG_REPORT, in seconds (0..1 day); 60 when unset.
  static std::chrono::seconds threshold_from_environment();

 private:
  struct Registry;  // every live watch's record, so that a watch whose group is idle can report another's call
  static std::shared_ptr<Registry> shared_registry();

  void run();
  // This rank's record as one line for the store: "<key>\t<since ms>\t<waiting peer>\t<step>",
  // where key is the call ("all_reduce #42") or "idle #41".
  std::string encoded_record() const;
  // Answers requests for records that appeared since the last look (one store read).
  void answer_requests();
  // Publishes this rank's record for every request up to `latest` not answered yet.
  void answer_up_to(std::int64_t latest);
  std::string gather_verdict(const CallRecord::Snapshot& mine, long long waited_seconds);

  // Verdicts name ranks as the world numbers them.
  int world_rank(int group_rank) const;

  Placement where_;
  std::chrono::seconds threshold_;
  CallRecord record_;
  std::mutex mutex_;           // one exchange at a time; guards what follows
  std::int64_t answered_ = 0;  // requests answered so far
  std::chrono::steady_clock::time_point last_answer_{};
  std::optional<std::uint64_t> reported_;  // sequence of the call last reported
  std::string store_trouble_;              // why the store stopped answering, if it did
  bool stopping_ = false;
  std::condition_variable wake_;
  std::shared_ptr<Registry> registry_;
  std::thread thread_;
};

std::string describe(const CallShape& shape);

}  // namespace comm
