// The tuner's view of hosts and links (algorithms/hierarchical.hpp, cost_model.hpp, tuner.hpp),
// without running a job: what a host layout says about crossings, and predictions against the
// bytes each algorithm pushes over a host's link, counted here by hand.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "algorithms/cost_model.hpp"
#include "algorithms/tuner.hpp"

using comm::Algorithm;
using comm::Collective;
using comm::algorithms::HostLayout;
using comm::algorithms::LinkModel;

namespace {

double predicted(const comm::algorithms::Predictions& predictions, Algorithm algorithm) {
  for (int i = 0; i < predictions.count; ++i) {
    if (predictions.items[static_cast<std::size_t>(i)].algorithm == algorithm) {
      return predictions.items[static_cast<std::size_t>(i)].seconds;
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("a host layout counts the ranks that cross each host's link", "[tuner]") {
  SECTION("two hosts of two consecutive ranks") {
    std::vector<int> hosts{7, 7, 9, 9};
    HostLayout layout(hosts, {}, 0, 4);
    CHECK(layout.usable());
    CHECK(layout.spanned_hosts() == 2);
    CHECK(layout.largest_host() == 2);
    CHECK(layout.first_remote_rank() == 2);
    CHECK(layout.ring_crossings() == 1);   // 1 -> 2 leaves the first host, 3 -> 0 the second
    CHECK(layout.crossing_pairs(0) == 0);  // partners 0-1 and 2-3 share a host
    CHECK(layout.crossing_pairs(1) == 2);  // 0-2 and 1-3 cross: both ranks of a host at once
  }
  SECTION("two hosts taking turns") {
    std::vector<int> hosts{7, 9, 7, 9};
    HostLayout layout(hosts, {}, 1, 4);
    CHECK(layout.usable());
    CHECK(layout.ring_crossings() == 2);  // every ring edge crosses
    CHECK(layout.crossing_pairs(0) == 2);
    CHECK(layout.crossing_pairs(1) == 0);
    CHECK(layout.local_group_ranks().size() == 2);
    CHECK(layout.local_group_ranks()[0] == 1);
    CHECK(layout.local_group_ranks()[1] == 3);
  }
  SECTION("uneven hosts") {
    std::vector<int> hosts{7, 7, 7, 9};
    HostLayout layout(hosts, {}, 0, 4);
    CHECK_FALSE(layout.usable());
    CHECK(layout.spanned_hosts() == 2);
    CHECK(layout.largest_host() == 3);
    CHECK(layout.first_remote_rank() == 3);
  }
  SECTION("a subgroup numbers its own ranks") {
    std::vector<int> hosts{7, 7, 9, 9, 9};
    std::vector<int> members{4, 0};  // group rank 0 is transport rank 4
    HostLayout layout(hosts, members, 0, 2);
    CHECK(layout.spanned_hosts() == 2);
    CHECK(layout.first_remote_rank() == 1);
  }
}

TEST_CASE("predictions follow the bytes each algorithm pushes over a host's link", "[tuner]") {
  std::vector<int> hosts{7, 7, 9, 9};
  HostLayout layout(hosts, {}, 0, 4);
  LinkModel link{10e-6, 125e6, "test"};  // 1 Gbit/s
  double n = 64.0 * 1024 * 1024;
  auto predictions = comm::algorithms::predict(Collective::AllReduce, 64 << 20, 4, layout, link, 64 * 1024);
  // Per host link, each way: the flat ring 2n(p-1)/p = 1.5n, recursive doubling n per crossing
  // rank (two of them), halving-doubling and the hierarchy n(H-1)/H * 2 = n.
  double one_pass = n / link.bytes_per_second;
  CHECK(predicted(predictions, Algorithm::Ring) == Catch::Approx(1.5 * one_pass).epsilon(0.05));
  CHECK(predicted(predictions, Algorithm::RecursiveDoubling) == Catch::Approx(2 * one_pass).epsilon(0.05));
  CHECK(predicted(predictions, Algorithm::HalvingDoubling) == Catch::Approx(one_pass).epsilon(0.05));
  CHECK(predicted(predictions, Algorithm::Hierarchical) == Catch::Approx(one_pass).epsilon(0.05));

  // Eight bytes: latency decides, and recursive doubling has the fewest rounds.
  auto small = comm::algorithms::predict(Collective::AllReduce, 8, 4, layout, link, 64 * 1024);
  CHECK(small.best().algorithm == Algorithm::RecursiveDoubling);

  // all_gather of 16 MiB blocks: the ring moves 3 blocks through each host's link, the
  // hierarchy 2 (one per local rank, once).
  double block = 16.0 * 1024 * 1024 / link.bytes_per_second;
  auto gather = comm::algorithms::predict(Collective::AllGather, 16 << 20, 4, layout, link, 64 * 1024);
  CHECK(predicted(gather, Algorithm::Ring) == Catch::Approx(3 * block).epsilon(0.05));
  CHECK(predicted(gather, Algorithm::Hierarchical) == Catch::Approx(2 * block).epsilon(0.05));

  // On one host, or with an unknown link, there is nothing to predict.
  std::vector<int> one_host{7, 7, 7, 7};
  HostLayout local(one_host, {}, 0, 4);
  CHECK(comm::algorithms::predict(Collective::AllReduce, 64 << 20, 4, local, link, 64 * 1024).count == 0);
  CHECK(comm::algorithms::predict(Collective::AllReduce, 64 << 20, 4, layout, LinkModel{}, 64 * 1024).count == 0);
}

TEST_CASE("the tuner runs the prediction's pick across hosts", "[tuner]") {
  std::vector<int> hosts{7, 7, 9, 9};
  HostLayout layout(hosts, {}, 0, 4);
  LinkModel link{10e-6, 125e6, "test"};
  auto choice = comm::algorithms::choose(
      {Collective::AllReduce, std::size_t{64} << 20, 4, Algorithm::Auto, 0, false, &layout, &link});
  CHECK(choice.algorithm == Algorithm::Hierarchical);                 // within 5% of halving-doubling
  CHECK(choice.link_chunk_bytes == 64 * 1024);                        // eager-sized across the link
  CHECK(choice.chunk_bytes == comm::algorithms::ring_chunk_bytes());  // the host's inside it
  CHECK(choice.across_hosts == Algorithm::HalvingDoubling);           // two hosts: a power of two

  // A fast link grows the chunk to 50 us of it (100 Gbit/s: 625 kB, whole pages).
  CHECK(comm::algorithms::link_chunk_bytes(LinkModel{1e-6, 12.5e9, "test"}) == 622592);
  CHECK(comm::algorithms::link_chunk_bytes(LinkModel{1e-6, 0.6e9, "test"}) == 64 * 1024);
}

TEST_CASE("broadcast and reduce go hierarchical only where the flat chain crosses a link more than once",
          "[tuner]") {
  LinkModel link{10e-6, 125e6, "test"};  // 1 Gbit/s
  auto pick = [&](const std::vector<int>& hosts, Collective collective, std::size_t bytes) {
    HostLayout layout(hosts, {}, 0, static_cast<int>(hosts.size()));
    return comm::algorithms::choose(
               {collective, bytes, static_cast<int>(hosts.size()), Algorithm::Auto, 0, false, &layout, &link})
        .algorithm;
  };
  for (Collective collective : {Collective::Broadcast, Collective::Reduce}) {
    // Ranks alternating between two hosts: the chain 0 -> 1 -> 2 -> 3 crosses three times, each
    // host's link carrying the message at least twice; the hierarchy carries it once.
    CHECK(pick({7, 9, 7, 9}, collective, 16 << 20) == Algorithm::Hierarchical);
    // Hosts holding consecutive ranks: the chain crosses once and pipelines through both hosts.
    CHECK(pick({7, 7, 9, 9}, collective, 16 << 20) == Algorithm::Ring);
    // A few bytes: latency decides, and the binomial tree has the fewest hops across.
    CHECK(pick({7, 9, 7, 9}, collective, 8) != Algorithm::Ring);
  }
  // Uneven hosts cannot run the hierarchy: the defaults stand.
  CHECK(pick({7, 7, 9}, Collective::Broadcast, 16 << 20) == Algorithm::Ring);
}
