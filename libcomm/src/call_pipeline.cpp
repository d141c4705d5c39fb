// The one path of every collective, on host and GPU buffers alike: the call's arguments are
// checked (call_checks.cpp) into the descriptor algorithms take; its algorithm is chosen (the
// caller's, COMM_ALGO's or the tuner's, from the algorithm table; on GPU buffers, the group's
// path); it is numbered and fingerprinted; then it runs, here when the caller waits for it and
// nothing is queued before it, else on the group's queue, completing the Work it handed out,
// and ends with a confirmation where its algorithm lets a rank return unheard by some
// (algorithms::Hearing), so that ranks whose calls differ all fail in it.
#include <memory>
#include <utility>

#include "algorithms/algorithm_table.hpp"
#include "algorithms/small_message.hpp"
#include "algorithms/tuner.hpp"
#include "comm/error.hpp"
#include "cuda/memory.hpp"
#include "libcomm/base/collective_traits.hpp"
#include "libcomm/base/fingerprint.hpp"
#include "libcomm/src/group.hpp"
#include "libcomm/src/trace_dump.hpp"

namespace comm {

const char* to_string(Operation operation) {
  switch (operation) {
    case Operation::Send: return "send";
    case Operation::Recv: return "recv";
    default: return to_string(static_cast<Collective>(operation));
  }
}

namespace {

bool is_transfer(const Call& call) { return call.operation == Operation::Send || call.operation == Operation::Recv; }

// What of a call's size every rank must agree on: its count; the counts of all_gather_v,
// reduce_scatter_v, gather_v and scatter_v, every one (folded into one number, FNV-1a); nothing
// of all_to_all_v's, whose counts differ by rank (each pair's must agree: the algorithm checks,
// and the call is confirmed).
std::size_t fingerprinted_count(const algorithms::HostCall& call) {
  if (has_per_pair_counts(call.collective)) return 0;
  if (!has_shared_counts(call.collective)) return call.count;
  std::uint64_t folded = 14695981039346656037ull;
  for (std::size_t count : call.counts) folded = (folded ^ count) * 1099511628211ull;
  return static_cast<std::size_t>(folded);
}

}  // namespace

// Operation's collectives are Collective's, in its order.
static_assert(static_cast<int>(Operation::Barrier) == static_cast<int>(Collective::Barrier));
static_assert(static_cast<int>(Operation::AllToAll) == static_cast<int>(Collective::AllToAll));

namespace {

const algorithms::HostCall& described(const ProcessGroup::Impl::ReadyCall& ready) { return ready.call; }
const algorithms::HostCall& described(const std::shared_ptr<const ProcessGroup::Impl::ReadyCall>& ready) {
  return ready->call;
}
const ProcessGroup::Impl::ReadyCall& ready_of(const ProcessGroup::Impl::ReadyCall& ready) { return ready; }
const ProcessGroup::Impl::ReadyCall& ready_of(const std::shared_ptr<const ProcessGroup::Impl::ReadyCall>& ready) {
  return *ready;
}

}  // namespace

// Inline: every collective passes here when tracing is on.
inline trace::Handle ProcessGroup::Impl::begin_trace(const ReadyCall& ready, std::uint64_t sequence,
                                                     std::uint8_t flags) const {
  const algorithms::HostCall& call = ready.call;
  Collective collective = call.collective;
  bool rooted = is_rooted(collective);
  return trace::begin(trace_group_, static_cast<std::uint8_t>(collective), sequence, call.count,
                      collective == Collective::Barrier ? std::int8_t{-1} : static_cast<std::int8_t>(call.dtype),
                      static_cast<std::uint8_t>(ready.algorithm), rooted ? call.root : -1, flags);
}

std::shared_ptr<Work> ProcessGroup::Impl::start(const Call& call) {
  if (is_transfer(call)) return point_to_point_.start(call);
  return queue_run(make_ready(call));
}

template <class Keep>
std::shared_ptr<Work> ProcessGroup::Impl::queue_run(Keep keep) {
  const algorithms::HostCall& call = described(keep);
  std::size_t bytes = call.bytes();
  const char* op = to_string(call.collective);
  std::uint64_t sequence = next_sequence(call.collective);
  // Queued now: its entry shows it waiting behind the calls before it until it starts.
  trace::Handle entry = begin_trace(ready_of(keep), sequence, 0);
  auto completion =
      queue_->submit([this, keep = std::move(keep), sequence, entry] { execute(ready_of(keep), sequence, entry); },
                     bytes);
  return std::make_shared<detail::CompletionWork>(
      std::move(completion), timeout_, detail::WorkLabel{op, rank(), -1, static_cast<std::int64_t>(sequence), bytes});
}

int ProcessGroup::Impl::run(const Call& call) {
  if (is_transfer(call)) return point_to_point_.run(call);
  run_ready(make_ready(call));
  return -1;
}

ProcessGroup::Impl::ReadyCall ProcessGroup::Impl::make_ready(const Call& call) {
  ReadyCall prepared{.call = checks_.collective(call)};
  const algorithms::HostCall& described = prepared.call;
  Collective collective = described.collective;
  Device device = device_of(call);
  Algorithm algorithm = Algorithm::Auto;
  if (device.kind == Device::Kind::Cuda) {
    const char* op = to_string(collective);
    Store* one_host_store = arena_ != nullptr ? store_.get() : nullptr;
    const auto& entry = algorithms::find_device_algorithm(collective, devices_.path(op));
    prepared.device_resources = devices_.resources(op, device.index, one_host_store);
    prepared.device = entry.run;
    prepared.device_index = device.index;
    algorithm = entry.algorithm;
    prepared.confirm = entry.hearing == algorithms::Hearing::Partial;
  } else {
    // One output per rank goes through a flat copy, which only the ring does.
    bool listed = collective == Collective::AllGather && !described.output_blocks.empty();
    Algorithm requested = listed ? Algorithm::Ring : parse_algorithm(call.algorithm, "the algorithm");
    std::size_t bytes = described.bytes();
    auto answer = choices_.find(collective, bytes, requested);
    if (!answer) {
      algorithms::Choice choice = choose(collective, bytes, requested);
      answer = algorithms::ChoiceCache::Answer{choice, algorithms::find_algorithm(collective, choice.algorithm)};
      choices_.store(collective, bytes, requested, *answer);
    }
    prepared.resources = {answer->choice, &host_layout_, arena_.get()};
    algorithm = answer->choice.algorithm;
    prepared.host = answer->entry->run;
    prepared.confirm = answer->entry->hearing == algorithms::Hearing::Partial;
  }
  bool barrier = collective == Collective::Barrier;
  bool reduces = collective == Collective::AllReduce || collective == Collective::Reduce ||
                 collective == Collective::ReduceScatter;
  prepared.fingerprint = detail::fingerprint({.collective = static_cast<int>(collective),
                                              .dtype = barrier ? -1 : static_cast<int>(described.dtype),
                                              .op = reduces ? static_cast<int>(described.op) : -1,
                                              .algorithm = algorithm,
                                              .root = described.root,
                                              .count = fingerprinted_count(described),
                                              .gpu = device.kind == Device::Kind::Cuda});
  prepared.algorithm = algorithm;
  return prepared;
}

Algorithm ProcessGroup::Impl::algorithm_for(Collective collective, std::size_t bytes, Algorithm requested) const {
  return choose(collective, bytes, requested).algorithm;
}

algorithms::Choice ProcessGroup::Impl::choose(Collective collective, std::size_t bytes, Algorithm requested) const {
  return algorithms::choose(
      {collective, bytes, size(), requested, rank(), shared_memory_usable(), &host_layout_, &link_});
}

void ProcessGroup::Impl::execute(const ReadyCall& prepared, std::uint64_t sequence, trace::Handle entry) {
  const algorithms::HostCall& call = prepared.call;
  const char* op = to_string(call.collective);
  bool barrier = call.collective == Collective::Barrier;
  CallShape shape{call.collective, barrier ? -1 : static_cast<int>(call.dtype), call.count, call.root};
  CallRecord* record = hang_watch_ ? &hang_watch_->record() : nullptr;
  algorithms::CollectiveContext context{
      *transport_, rank(),          size(), sequence,             timeout_,       op,
      layout_.id,  layout_.members, 0,      prepared.fingerprint, scratch_.get(), record ? record->waiting() : nullptr};
  // The hang watch sees the call from here to its end (a few stores to memory each way).
  struct InCall {
    CallRecord* record;
    ~InCall() {
      if (record) record->end();
    }
  } in_call{record};
  if (record) record->begin(shape, sequence);
  // A queued call's entry was made when it was queued; a blocking one's is made here.
  if (entry) {
    entry.start();
  } else if (trace::FlightRecorder::active() != nullptr) {
    entry = begin_trace(prepared, sequence, trace::kStartedQueued);
  }
  try {
    if (prepared.host != nullptr) {
      prepared.host(context, call, prepared.resources);
    } else {
      prepared.device(context, call, prepared.device_resources);
      // The call completes when the stream has run it.
      cuda::Stream::synchronize_handle(prepared.device_resources.stream, prepared.device_index);
    }
    if (prepared.confirm) algorithms::confirm_call(context, arena_.get());
  } catch (Error& error) {
    error.add_context(ErrorContext{.rank = rank(), .op = op, .sequence = static_cast<std::int64_t>(sequence)});
    if (error.code() == ErrorCode::Timeout && hang_watch_) {
      // The timeout's message is the verdict: where every rank of the group is now.
      std::string verdict = hang_watch_->verdict_now(timeout_) + " (" + error.message() + ")";
      TimeoutError timeout(verdict, error.context());
      transport_->groups().revoke(layout_.id, timeout);
      trace::end_with_error(entry, timeout);
      throw timeout;
    }
    trace::end_with_error(entry, error);
    // Transfers of the failed call may still be posted into its buffers, and peers may be
    // waiting for data this rank will not send: revoke the group, which lets go of its buffers
    // and tells the members, so nothing lands here later and nobody waits out a timeout (as
    // with NCCL, a group is unusable after a failed call; its survivors may shrink it). A
    // mismatch stops the whole transport (the transport has, already): a call never pairs
    // with another. Argument checks fail before the call starts, not here: an
    // InvalidArgumentError here is the transport's (a message that did not fit).
    if (error.code() == ErrorCode::Mismatch) {
      transport_->abort(error.what(), &error);
    } else {
      transport_->groups().revoke(layout_.id, error);
    }
    throw;
  } catch (const std::exception& error) {
    trace::end_with_error(entry, error);
    throw;
  }
  entry.finish(trace::State::Completed);
}

}  // namespace comm
