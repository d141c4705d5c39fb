// The hierarchical all_reduce on ranks made to look like several hosts: rank r says it is on
// host r / P (COMM_HOST_ID, P = COMM_TEST_RANKS_PER_HOST), so ranks of one "host" talk over shared
// memory and the others over TCP, as on a cluster. Every dtype and op at counts around the shard
// boundaries (multiples of P, plus and minus one), below and past a ring chunk, against the
// reference fold of every rank's input; the results must be bitwise identical on every rank.
// all_gather and reduce_scatter through the hierarchy too, in and out of place; broadcast and
// reduce from every root.
// Auto must pick the hierarchy for a large all_reduce here, and a group whose hosts hold different
// numbers of its ranks (3 ranks, 2 per host) must refuse it by name and fall back to the ring.
// With COMM_TEST_REAL_HOSTS=1 the hosts are the real ones (tests/netns/two_hosts.sh runs it across
// two network namespaces), LOCAL_WORLD_SIZE ranks on each.
//
//   COMM_TEST_RANKS_PER_HOST=2 commrun -n 4 build/tests/hierarchical_check
#include <comm/comm.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tests/support/reduce_reference.hpp"

using comm::Buffer;
using comm::DType;
using comm::ReduceOp;

namespace {

int failures = 0;

void check(bool condition, const std::string& what) {
  if (condition) return;
  ++failures;
  if (failures <= 20) std::fprintf(stderr, "%s\n", what.c_str());
}

bool bitwise_op(ReduceOp op) { return op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor; }

// One all_reduce, checked against the reference and against every other rank's bytes.
void check_all_reduce(comm::ProcessGroup& group, DType dtype, ReduceOp op, std::size_t count,
                      std::string_view algorithm, unsigned salt) {
  auto inputs = comm::testing::all_inputs(group.size(), dtype, count, salt);
  auto data = inputs[static_cast<std::size_t>(group.rank())];
  group.all_reduce(Buffer(data.data(), count, dtype), op, algorithm);
  std::string what = std::string(comm::to_string(dtype)) + " " + comm::to_string(op) + " x " + std::to_string(count);
  std::size_t wrong = comm::testing::count_wrong(data, inputs, dtype, op, count);
  check(wrong == 0, what + ": " + std::to_string(wrong) + " elements differ from the reference");
  std::size_t bytes = data.size();
  std::vector<std::uint8_t> everyone(bytes * static_cast<std::size_t>(group.size()));
  group.all_gather(Buffer(everyone.data(), everyone.size(), DType::UInt8), Buffer(data.data(), bytes, DType::UInt8));
  for (int r = 0; r < group.size(); ++r) {
    check(bytes == 0 || std::memcmp(everyone.data() + bytes * static_cast<std::size_t>(r), data.data(), bytes) == 0,
          what + ": rank " + std::to_string(r) + "'s bytes differ from rank " + std::to_string(group.rank()) + "'s");
  }
}

// all_gather and reduce_scatter through the hierarchy, in and out of place.
void check_gather_and_scatter(comm::ProcessGroup& group, DType dtype, ReduceOp op, std::size_t count, unsigned salt) {
  int size = group.size(), rank = group.rank();
  std::size_t element = comm::element_size(dtype), block = count * element;
  std::string what = std::string(comm::to_string(dtype)) + " x " + std::to_string(count);
  // all_gather: every rank's input, in rank order.
  auto inputs = comm::testing::all_inputs(size, dtype, count, salt);
  std::vector<std::uint8_t> expected;
  for (const auto& input : inputs) expected.insert(expected.end(), input.begin(), input.end());
  for (bool in_place : {false, true}) {
    std::vector<std::uint8_t> output(block * static_cast<std::size_t>(size), 0xEE);
    auto input = inputs[static_cast<std::size_t>(rank)];
    std::uint8_t* source = input.data();
    if (in_place) {
      std::memcpy(output.data() + block * static_cast<std::size_t>(rank), input.data(), block);
      source = output.data() + block * static_cast<std::size_t>(rank);
    }
    group.all_gather(Buffer(output.data(), count * static_cast<std::size_t>(size), dtype), Buffer(source, count, dtype),
                     "hierarchical");
    check(output == expected, "all_gather " + what + (in_place ? " in place" : "") + ": wrong blocks");
  }
  // reduce_scatter: block r of every rank's input, reduced, to rank r.
  auto whole = comm::testing::all_inputs(size, dtype, count * static_cast<std::size_t>(size), salt + 1000);
  std::vector<std::vector<std::uint8_t>> blocks_for_me;
  for (const auto& input : whole) {
    blocks_for_me.emplace_back(input.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(rank)),
                               input.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(rank + 1)));
  }
  for (bool in_place : {false, true}) {
    auto input = whole[static_cast<std::size_t>(rank)];
    auto original = input;
    std::vector<std::uint8_t> separate(block, 0xEE);
    std::uint8_t* output = in_place ? input.data() + block * static_cast<std::size_t>(rank) : separate.data();
    group.reduce_scatter(Buffer(output, count, dtype),
                         Buffer(input.data(), count * static_cast<std::size_t>(size), dtype), op, "hierarchical");
    std::vector<std::uint8_t> result(output, output + block);
    std::size_t wrong = comm::testing::count_wrong(result, blocks_for_me, dtype, op, count);
    check(wrong == 0, "reduce_scatter " + what + " " + comm::to_string(op) + (in_place ? " in place" : "") + ": " +
                          std::to_string(wrong) + " elements differ from the reference");
    if (!in_place) check(input == original, "reduce_scatter " + what + " changed its input");
  }
}

// broadcast and reduce through the hierarchy from every root: broadcast leaves root's bytes on
// every rank; reduce leaves the reference on root and every other rank's input as it was (the
// leaders of other hosts pass partial results through scratch).
void check_broadcast_and_reduce(comm::ProcessGroup& group, DType dtype, ReduceOp op, std::size_t count, unsigned salt) {
  std::string what = std::string(comm::to_string(dtype)) + " x " + std::to_string(count);
  auto inputs = comm::testing::all_inputs(group.size(), dtype, count, salt);
  const auto& mine = inputs[static_cast<std::size_t>(group.rank())];
  for (int root = 0; root < group.size(); ++root) {
    auto data = mine;
    group.broadcast(Buffer(data.data(), count, dtype), root, "hierarchical");
    check(data == inputs[static_cast<std::size_t>(root)],
          "broadcast " + what + " from " + std::to_string(root) + ": not root's bytes");
    data = mine;
    group.reduce(Buffer(data.data(), count, dtype), root, op, "hierarchical");
    if (group.rank() == root) {
      std::size_t wrong = comm::testing::count_wrong(data, inputs, dtype, op, count);
      check(wrong == 0, "reduce " + what + " " + comm::to_string(op) + " to " + std::to_string(root) + ": " +
                            std::to_string(wrong) + " elements differ from the reference");
    } else {
      check(data == mine, "reduce " + what + " to " + std::to_string(root) + " changed a non-root's input");
    }
  }
}

}  // namespace

int main() try {
  bool real_hosts = std::getenv("COMM_TEST_REAL_HOSTS") != nullptr;
  const char* per_host_text = std::getenv(real_hosts ? "LOCAL_WORLD_SIZE" : "COMM_TEST_RANKS_PER_HOST");
  const char* rank_text = std::getenv("RANK");
  if (!per_host_text || !rank_text) {
    std::fprintf(stderr, "run under commrun with COMM_TEST_RANKS_PER_HOST (or COMM_TEST_REAL_HOSTS) set\n");
    return 2;
  }
  int per_host = std::atoi(per_host_text);
  std::string host = "host" + std::to_string(std::atoi(rank_text) / per_host);
  if (!real_hosts) ::setenv("COMM_HOST_ID", host.c_str(), 1);
  auto group = comm::init_process_group();
  int size = group->size();
  // On real hosts each namespace knows only its own count: COMM_TEST_UNEVEN_HOSTS says the job's.
  bool even = real_hosts ? std::getenv("COMM_TEST_UNEVEN_HOSTS") == nullptr
                         : size % per_host == 0 && size / per_host > 1 && per_host > 1;

  if (!even) {
    bool refused = false;
    std::vector<float> data(100, 1.0f);
    try {
      group->all_reduce(data, ReduceOp::Sum, "hierarchical");
    } catch (const comm::InvalidArgumentError& error) {
      refused = std::string(error.what()).find("hierarchical needs") != std::string::npos;
    }
    check(refused, "hierarchical was not refused on uneven hosts");
    // Whatever the tuner picks for them, and every algorithm it may pick, right on every rank.
    unsigned salt = 0;
    for (std::string_view algorithm : {"", "ring", "recursive_doubling", "halving_doubling"}) {
      for (std::size_t count : {std::size_t{1}, std::size_t{1001}, (std::size_t{1} << 20) + 7}) {
        check_all_reduce(*group, DType::Float32, ReduceOp::Sum, count, algorithm, ++salt);
        check_all_reduce(*group, DType::Int64, ReduceOp::Max, count, algorithm, ++salt);
      }
    }
    check_all_reduce(*group, DType::Float64, ReduceOp::Avg, 3 << 20, "", ++salt);
  } else {
    // Across a link slower than the host's memory (the given COMM_LINK_GBPS; the namespaced
    // hosts measure theirs, unlimited and as fast as memory, so there the choice may go either
    // way and only the results are checked) the tuner's cost model never runs an algorithm that
    // pushes more than the message over each host's link (the flat ring pushes 2(p-1)/p of it,
    // recursive doubling log2(hosts) times it): the hierarchy, or halving-doubling where it keeps
    // its large steps inside the hosts.
    for (std::size_t bytes : {std::size_t{16} << 20, std::size_t{64} << 20}) {
      if (real_hosts) break;
      std::string_view chosen = group->algorithm_for(comm::Collective::AllReduce, bytes);
      check(chosen == "hierarchical" || chosen == "halving_doubling",
            "auto picked " + std::string(chosen) + " for " + std::to_string(bytes >> 20) +
                " MiB across hosts, not the hierarchy nor halving-doubling");
    }
    std::size_t p = static_cast<std::size_t>(per_host);
    unsigned salt = 0;
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Int8,
                        DType::Float16, DType::BFloat16, DType::Bool, DType::UInt64}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::BXor,
                          ReduceOp::BAnd}) {
        bool is_float = comm::testing::is_float(dtype);
        if ((bitwise_op(op) && is_float) || (dtype == DType::Bool && op == ReduceOp::Avg)) continue;  // refused
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, p - 1, p, p + 1, 7 * p + 3, std::size_t{20011}}) {
          check_all_reduce(*group, dtype, op, count, "hierarchical", ++salt);
        }
      }
    }
    for (DType dtype : {DType::Float32, DType::Int64, DType::BFloat16, DType::UInt8}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{4099}}) {
          check_gather_and_scatter(*group, dtype, op, count, ++salt);
        }
      }
    }
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::BFloat16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min}) {
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{4099}, std::size_t{300007}}) {
          check_broadcast_and_reduce(*group, dtype, op, count, ++salt);
        }
      }
    }
    check(real_hosts || std::string_view(group->algorithm_for(comm::Collective::AllGather, 16 << 20)) == "hierarchical",
          "auto did not pick hierarchical for a 16 MiB all_gather block across hosts");
    // Halving-doubling across the hosts, its halvings in several chunks of the link.
    check_all_reduce(*group, DType::Float32, ReduceOp::Sum, (std::size_t{1} << 20) + 3, "halving_doubling", ++salt);
    check_all_reduce(*group, DType::Float64, ReduceOp::Avg, (std::size_t{1} << 19) + 1, "halving_doubling", ++salt);
    // Past several ring chunks (2 MiB) per shard, through Auto.
    check_all_reduce(*group, DType::Float32, ReduceOp::Sum, (std::size_t{3} << 20) + 5, "", ++salt);
    check_all_reduce(*group, DType::Float64, ReduceOp::Avg, (std::size_t{1} << 20) + 3, "", ++salt);
  }
  group->barrier();
  std::printf("[rank %d on %s] hierarchical all_reduce: %d failures\n", group->rank(), host.c_str(), failures);
  return failures == 0 ? 0 : 1;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "%s\n", error.what());
  return 1;
}
