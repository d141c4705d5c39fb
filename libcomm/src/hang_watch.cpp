#include "libcomm/src/hang_watch.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "comm/types.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/src/trace_dump.hpp"

namespace comm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTick = std::chrono::milliseconds(250);
constexpr int kTicksPerStoreLook = 4;  // the store is asked once a second
// How long a verdict waits for the other ranks' records: a look of theirs (1 s) and slack. A
// quarter of a second of slack was once too little on a loaded 2-core CI machine (both ranks
// outside the waiting call reported as not answering); a verdict with every record in returns
// at once, so the slack costs only the case it saves.
constexpr auto kGatherWait = std::chrono::milliseconds(2000);

long long seconds_since(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - since).count();
}

// A rank's record as read back from the store.
struct PeerRecord {
  std::string kind;   // "call", "idle" or "none"
  std::string call;   // "all_reduce #42"
  std::string shape;  // "(root 0)" or ""
  long long age_ms = 0;
  int waiting_peer = -1;
};

std::optional<PeerRecord> parse_record(const std::string& text) {
  std::vector<std::string> fields;
  std::stringstream stream(text);
  for (std::string field; std::getline(stream, field, '\t');) fields.push_back(field);
  if (fields.size() != 5) return std::nullopt;
  try {
    return PeerRecord{fields[0], fields[1], fields[2], std::stoll(fields[3]), std::stoi(fields[4])};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "0-2,4-7"
std::string rank_ranges(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

std::string ranks_are(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks) + (ranks.size() == 1 ? " is" : " are");
}

std::string call_name(const CallShape& shape, std::uint64_t sequence) {
  return std::string(to_string(shape.collective)) + " #" + std::to_string(sequence);
}

std::string root_text(const CallShape& shape) {
  return shape.root >= 0 ? "(root " + std::to_string(shape.root) + ")" : "";
}

// Every live group's record in this process, so that a rank idle in one group can say it is
// busy in another (a subgroup's call that keeps it from this one).
}  // namespace

struct HangWatch::Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, const CallRecord*>> records;  // group name, record
};

// Shared by the watches, which each hold it: a group destroyed while the program exits (one a
// static object or a C program's leaked communicator holds) still finds it, whatever order the
// statics go in.
std::shared_ptr<HangWatch::Registry> HangWatch::shared_registry() {
  static const std::shared_ptr<Registry> instance = std::make_shared<Registry>();
  return instance;
}

std::string describe(const CallShape& shape) {
  if (shape.dtype < 0) return "no data";
  std::string text = std::string(to_string(static_cast<DType>(shape.dtype))) + " x " + std::to_string(shape.count);
  if (shape.root >= 0) text += ", root " + std::to_string(shape.root);
  return text;
}

CallRecord::CallRecord() : observed_since_(Clock::now()) {}

void CallRecord::begin(const CallShape& shape, std::uint64_t sequence) {
  std::uint64_t version = version_.load(std::memory_order_relaxed);
  version_.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  in_call_.store(true, std::memory_order_relaxed);
  any_call_.store(true, std::memory_order_relaxed);
  collective_.store(static_cast<int>(shape.collective), std::memory_order_relaxed);
  dtype_.store(shape.dtype, std::memory_order_relaxed);
  count_.store(shape.count, std::memory_order_relaxed);
  root_.store(shape.root, std::memory_order_relaxed);
  sequence_.store(sequence, std::memory_order_relaxed);
  waiting_.peer.store(-1, std::memory_order_relaxed);
  version_.store(version + 2, std::memory_order_release);
}

void CallRecord::end() {
  std::uint64_t version = version_.load(std::memory_order_relaxed);
  version_.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  in_call_.store(false, std::memory_order_relaxed);
  version_.store(version + 2, std::memory_order_release);
}

CallRecord::Snapshot CallRecord::read() const {
  Snapshot snapshot;
  while (true) {
    std::uint64_t before = version_.load(std::memory_order_acquire);
    if (before % 2 != 0) continue;  // a write in progress: a few stores, over at once
    snapshot.in_call = in_call_.load(std::memory_order_relaxed);
    snapshot.any_call = any_call_.load(std::memory_order_relaxed);
    snapshot.shape = CallShape{static_cast<Collective>(collective_.load(std::memory_order_relaxed)),
                               dtype_.load(std::memory_order_relaxed), count_.load(std::memory_order_relaxed),
                               root_.load(std::memory_order_relaxed)};
    snapshot.sequence = sequence_.load(std::memory_order_relaxed);
    snapshot.waiting_peer = waiting_.peer.load(std::memory_order_relaxed);
    snapshot.waiting_step = waiting_.step.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) != before) continue;
    // The time of the change is taken by the first look after it (the watch looks four times a
    // second), not by the calling thread: a clock read per call would cost more than the rest.
    std::lock_guard lock(observe_mutex_);
    if (before != observed_version_) {
      observed_version_ = before;
      observed_since_ = Clock::now();
    }
    snapshot.since = observed_since_;
    return snapshot;
  }
}

HangWatch::HangWatch(Placement placement, std::chrono::seconds threshold)
    : where_(std::move(placement)), threshold_(threshold), registry_(shared_registry()) {
  {
    std::lock_guard lock(registry_->mutex);
    registry_->records.emplace_back(where_.group, &record_);
  }
  thread_ = std::thread([this] { run(); });
}

HangWatch::~HangWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard lock(registry_->mutex);
  std::erase_if(registry_->records, [this](const auto& entry) { return entry.second == &record_; });
}

std::chrono::seconds HangWatch::threshold_from_environment() {
  auto seconds = environment::get_integer_in("COMM_HANG_REPORT", 0, 86400,
                                             "seconds a collective waits before the ranks report where each one is "
                                             "(0: never)");
  return std::chrono::seconds(seconds.value_or(60));
}

int HangWatch::world_rank(int group_rank) const {
  bool known = !where_.world_ranks.empty() && group_rank >= 0 && group_rank < where_.size;
  return known ? where_.world_ranks[static_cast<std::size_t>(group_rank)] : group_rank;
}

void HangWatch::run() {
  for (int tick = 1;; ++tick) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, kTick, [this] { return stopping_; })) return;
    }
    if (tick % kTicksPerStoreLook == 0) answer_requests();
    if (threshold_.count() == 0) continue;
    auto mine = record_.read();
    if (!mine.in_call || Clock::now() - mine.since < threshold_) continue;
    if (reported_ == mine.sequence) continue;
    reported_ = mine.sequence;
    log::get(log::Subsystem::Group).warn("{}", gather_verdict(mine, 0));
    trace::dump_after("hang");
  }
}

std::string HangWatch::encoded_record() const {
  auto mine = record_.read();
  std::string kind = mine.in_call ? "call" : mine.any_call ? "idle" : "none";
  std::string call = call_name(mine.shape, mine.sequence);
  std::string detail = root_text(mine.shape);
  auto since = mine.since;
  if (!mine.in_call) {
    std::lock_guard lock(registry_->mutex);
    for (const auto& [group, record] : registry_->records) {
      if (record == &record_) continue;
      auto other = record->read();
      if (!other.in_call) continue;
      kind = "call";
      call = call_name(other.shape, other.sequence) + " of group " + group;
      detail = root_text(other.shape);
      since = other.since;
      break;
    }
  }
  auto age = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  return kind + "\t" + call + "\t" + detail + "\t" + std::to_string(age) + "\t" +
         std::to_string(kind == "call" && mine.in_call ? mine.waiting_peer : -1);
}

void HangWatch::answer_up_to(std::int64_t latest) {
  std::int64_t from;
  {
    std::lock_guard lock(mutex_);
    if (latest <= answered_) return;
    from = answered_;
    answered_ = latest;
    last_answer_ = Clock::now();
  }
  std::string record = encoded_record();
  for (auto request = from + 1; request <= latest; ++request) {
    where_.store->set(where_.key_prefix + std::to_string(request) + "/" + std::to_string(where_.rank), record);
  }
  // Another rank gathers a verdict: this rank's calls belong in the picture of the hang too.
  trace::dump_after("hang");
}

void HangWatch::answer_requests() {
  {
    std::lock_guard lock(mutex_);
    if (!store_trouble_.empty()) return;
  }
  try {
    answer_up_to(where_.store->add(where_.key_prefix + "requests", 0));
  } catch (const Error& error) {
    // The store host may be gone at the end of a job: no verdict can be gathered any more, and
    // a verdict asked for later says why; the calls themselves fail through the transport.
    std::lock_guard lock(mutex_);
    store_trouble_ = error.what();
  }
}

std::string HangWatch::verdict_now(std::chrono::milliseconds waited) {
  return gather_verdict(record_.read(), std::chrono::duration_cast<std::chrono::seconds>(waited).count());
}

std::string HangWatch::gather_verdict(const CallRecord::Snapshot& mine, long long waited_seconds) {
  waited_seconds = std::max(waited_seconds, seconds_since(mine.since));
  std::string verdict = call_name(mine.shape, mine.sequence) + " (" + describe(mine.shape) + ", group " + where_.group +
                        ") has waited " + std::to_string(waited_seconds) + " s: ";
  std::vector<std::optional<PeerRecord>> records(static_cast<std::size_t>(where_.size));
  std::string trouble;
  try {
    std::int64_t request;
    {
      std::lock_guard lock(mutex_);
      trouble = store_trouble_;
    }
    if (!trouble.empty()) throw IoError(trouble);
    // Another rank may have asked a moment ago: its request serves as well as a new one.
    answer_requests();
    bool reuse;
    {
      std::lock_guard lock(mutex_);
      reuse = answered_ > 0 && Clock::now() - last_answer_ < std::chrono::seconds(1);
      request = answered_;
    }
    if (!reuse) {
      request = where_.store->add(where_.key_prefix + "requests", 1);
      answer_up_to(request);  // our record for it, and for any request we had not seen yet
    }
    std::string prefix = where_.key_prefix + std::to_string(request) + "/";
    // Meanwhile keep answering: the others may be gathering their own verdicts just now.
    std::vector<bool> have(static_cast<std::size_t>(where_.size), false);
    for (auto deadline = Clock::now() + kGatherWait;;) {
      bool all = true;
      for (int peer = 0; peer < where_.size; ++peer) {
        auto index = static_cast<std::size_t>(peer);
        if (have[index]) continue;
        std::string key = prefix + std::to_string(peer);
        if (where_.store->check({key})) {
          have[index] = true;
          records[index] = parse_record(where_.store->get_string(key));
        } else {
          all = false;
        }
      }
      if (all || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      answer_requests();
    }
  } catch (const Error& error) {
    return verdict + "cannot compare notes with the other ranks, the store does not answer (" + error.message() + ")";
  }

  // Ranks in this same call first, then everyone else by what they are doing.
  std::string this_call = call_name(mine.shape, mine.sequence);
  std::vector<int> with_me, silent;
  std::vector<int> waited_on;
  std::map<std::string, std::pair<std::vector<int>, long long>> elsewhere;  // phrase -> ranks, longest age
  for (int peer = 0; peer < where_.size; ++peer) {
    const auto& record = records[static_cast<std::size_t>(peer)];
    if (!record) {
      silent.push_back(world_rank(peer));
    } else if (record->kind == "call" && record->call == this_call) {
      with_me.push_back(world_rank(peer));
      if (record->waiting_peer >= 0) waited_on.push_back(world_rank(record->waiting_peer));
    } else {
      std::string phrase = record->kind == "call"
                               ? "in " + record->call + (record->shape.empty() ? "" : " " + record->shape)
                           : record->kind == "idle" ? "not in any collective (last: " + record->call + ")"
                                                    : "not in any collective (none called yet)";
      auto& entry = elsewhere[phrase];
      entry.first.push_back(world_rank(peer));
      entry.second = std::max(entry.second, record->age_ms / 1000);
    }
  }
  std::vector<std::string> parts;
  if (!with_me.empty()) {
    std::string part = ranks_are(with_me) + " in " + this_call;
    std::sort(waited_on.begin(), waited_on.end());
    waited_on.erase(std::unique(waited_on.begin(), waited_on.end()), waited_on.end());
    if (!waited_on.empty())
      part += " (waiting on " + std::string(waited_on.size() == 1 ? "rank " : "ranks ") + rank_ranges(waited_on) + ")";
    parts.push_back(part);
  }
  for (const auto& [phrase, entry] : elsewhere) {
    parts.push_back(ranks_are(entry.first) + " " + phrase + " since " + std::to_string(entry.second) + " s");
  }
  if (!silent.empty()) {
    parts.push_back(ranks_are(silent) + " not answering (process stopped, or its group gone?)");
  }
  for (std::size_t i = 0; i < parts.size(); ++i) verdict += (i == 0 ? "" : "; ") + parts[i];
  return verdict;
}

}  // namespace comm
