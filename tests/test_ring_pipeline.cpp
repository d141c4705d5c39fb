// The ring's pipeline when the transport stops reducing on arrival part-way through a call (the
// predecessor finished its part and closed its connection, leaving its last messages behind):
// receives posted to reduce on arrival must not be reduced a second time from scratch. Run over
// an in-memory transport that grants irecv_reduce a given number of times, with poisoned
// scratch, against sums computed here.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "algorithms/reduce.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/scratch.hpp"

using comm::DType;
using comm::ReduceOp;
using comm::algorithms::CollectiveContext;
using comm::detail::Completion;
using comm::transport::Reduction;

namespace {

// Messages between thread ranks, matched by (source, destination, tag) under one lock.
struct PostOffice {
  struct Message {
    int source;
    std::uint64_t tag;
    std::vector<std::uint8_t> bytes;
  };
  struct Receive {
    int source;
    std::uint64_t tag;
    void* data;
    Reduction reduction;
    std::shared_ptr<Completion> completion;
  };
  std::mutex mutex;
  std::vector<std::deque<Message>> waiting;  // per destination
  std::vector<std::deque<Receive>> posted;   // per destination

  explicit PostOffice(int ranks) : waiting(ranks), posted(ranks) {}

  static void deliver(const Receive& receive, const std::vector<std::uint8_t>& bytes) {
    if (receive.reduction) {
      receive.reduction(receive.data, bytes.data(), bytes.size() / receive.reduction.element);
    } else if (!bytes.empty()) {
      std::memcpy(receive.data, bytes.data(), bytes.size());
    }
    receive.completion->complete(bytes.size(), receive.source);
  }
};

class MailboxTransport final : public comm::transport::Transport {
 public:
  MailboxTransport(PostOffice& office, int rank, int reducing_receives)
      : office_(office), rank_(rank), reducing_receives_(reducing_receives) {}

  std::shared_ptr<Completion> isend(int peer, const void* data, std::size_t bytes, std::uint64_t tag,
                                    std::uint64_t) override {
    const auto* begin = static_cast<const std::uint8_t*>(data);
    std::vector<std::uint8_t> copy(begin, begin + bytes);
    {
      std::lock_guard lock(office_.mutex);
      auto& posted = office_.posted[peer];
      auto match = std::find_if(posted.begin(), posted.end(),
                                [&](const auto& receive) { return receive.source == rank_ && receive.tag == tag; });
      if (match != posted.end()) {
        PostOffice::Receive receive = *match;
        posted.erase(match);
        PostOffice::deliver(receive, copy);
      } else {
        office_.waiting[peer].push_back({rank_, tag, std::move(copy)});
      }
    }
    auto done = std::make_shared<Completion>();
    done->complete(bytes, rank_);
    return done;
  }
  std::shared_ptr<Completion> irecv(int peer, void* data, std::size_t capacity, std::uint64_t tag,
                                    std::uint64_t fingerprint) override {
    auto completion = std::make_shared<Completion>();
    irecv_into(completion, peer, data, capacity, tag, fingerprint);
    return completion;
  }
  std::shared_ptr<Completion> irecv_reduce(int peer, void* data, std::size_t, std::uint64_t tag,
                                           const Reduction& reduction, std::uint64_t) override {
    if (reducing_receives_ == 0) return nullptr;
    --reducing_receives_;
    auto completion = std::make_shared<Completion>();
    post({peer, tag, data, reduction, completion});
    return completion;
  }
  void irecv_into(std::shared_ptr<Completion> completion, int peer, void* data, std::size_t, std::uint64_t tag,
                  std::uint64_t) override {
    post({peer, tag, data, {}, std::move(completion)});
  }
  bool progress(int, const Completion*) override { return false; }
  std::string peer_name(int peer) const override { return "rank " + std::to_string(peer); }
  const char* medium() const override { return "mailbox"; }
  void abort(const std::string&, const comm::Error*) override {}

 private:
  void post(PostOffice::Receive receive) {
    std::lock_guard lock(office_.mutex);
    auto& waiting = office_.waiting[rank_];
    auto match = std::find_if(waiting.begin(), waiting.end(), [&](const auto& message) {
      return message.source == receive.source && message.tag == receive.tag;
    });
    if (match != waiting.end()) {
      auto bytes = std::move(match->bytes);
      waiting.erase(match);
      PostOffice::deliver(receive, bytes);
    } else {
      office_.posted[rank_].push_back(std::move(receive));
    }
  }

  PostOffice& office_;
  int rank_;
  int reducing_receives_;
};

std::int64_t input_value(int rank, std::size_t index) { return static_cast<std::int64_t>(index) * 7 + rank * 1000 + 3; }

// Runs `call(context, data)` on every rank over one PostOffice, each rank's transport granting
// `reducing_receives` reducing receives; returns each rank's buffer afterwards.
template <class Call>
std::vector<std::vector<std::int64_t>> run_ring(int ranks, std::size_t count, int reducing_receives, Call call) {
  PostOffice office(ranks);
  std::vector<std::vector<std::int64_t>> buffers(ranks);
  std::vector<std::future<void>> done;
  for (int rank = 0; rank < ranks; ++rank) {
    done.push_back(std::async(std::launch::async, [&, rank] {
      MailboxTransport transport(office, rank, reducing_receives);
      comm::algorithms::ScratchPool scratch;
      // What the scratch held before (another call's bytes) must never reach a result.
      for (int slot = 0; slot < comm::algorithms::ScratchPool::kSlots; ++slot) {
        std::memset(scratch.get(slot, 1 << 16), 0x5A, 1 << 16);
      }
      CollectiveContext context{transport, rank, ranks, 1, std::chrono::seconds(20), "test"};
      context.scratch = &scratch;
      auto& data = buffers[rank];
      data.resize(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = input_value(rank, i);
      call(context, data);
    }));
  }
  for (auto& rank : done) rank.get();
  return buffers;
}

std::int64_t sum_over_ranks(int ranks, std::size_t index) {
  std::int64_t sum = 0;
  for (int rank = 0; rank < ranks; ++rank) sum += input_value(rank, index);
  return sum;
}

}  // namespace

TEST_CASE("ring reduce_scatter: a transport that stops reducing on arrival mid-call", "[ring]") {
  int ranks = GENERATE(3, 4, 5, 8);
  int granted = GENERATE(0, 1, 2, 3, 5, 100);
  std::size_t block = GENERATE(std::size_t{1}, std::size_t{37}, std::size_t{5000});
  INFO(ranks << " ranks, " << granted << " reducing receives granted, blocks of " << block);
  auto buffers = run_ring(ranks, block * static_cast<std::size_t>(ranks), granted, [&](auto& context, auto& data) {
    // Chunks of 1 KiB: several per block, so receives are posted ahead within one step too.
    comm::algorithms::ring_reduce_scatter(context, data.data(), block, DType::Int64, ReduceOp::Sum, 1024);
  });
  for (int rank = 0; rank < ranks; ++rank) {
    for (std::size_t i = 0; i < block; ++i) {
      std::size_t index = static_cast<std::size_t>(rank) * block + i;
      INFO("rank " << rank << ", element " << index);
      REQUIRE(buffers[rank][index] == sum_over_ranks(ranks, index));
    }
  }
}

TEST_CASE("ring all_reduce: a transport that stops reducing on arrival mid-call", "[ring]") {
  int ranks = GENERATE(3, 4, 7);
  int granted = GENERATE(0, 1, 2, 4, 100);
  std::size_t count = GENERATE(std::size_t{5}, std::size_t{3001});
  INFO(ranks << " ranks, " << granted << " reducing receives granted, " << count << " elements");
  auto buffers = run_ring(ranks, count, granted, [&](auto& context, auto& data) {
    comm::algorithms::ring_all_reduce(context, data.data(), data.size(), DType::Int64, ReduceOp::Sum, 1024);
  });
  for (int rank = 0; rank < ranks; ++rank) {
    for (std::size_t i = 0; i < count; ++i) {
      INFO("rank " << rank << ", element " << i);
      REQUIRE(buffers[rank][i] == sum_over_ranks(ranks, i));
    }
  }
}
