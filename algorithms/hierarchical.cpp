#include "algorithms/hierarchical.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "algorithms/halving_doubling.hpp"
#include "algorithms/reduce.hpp"
#include "algorithms/ring.hpp"

namespace comm::algorithms {
namespace {

// The context of one part of the call: `members` (transport ranks; `group_ranks` as the group
// numbers them) as the whole group, in a quarter of the call's steps (the three phases and the
// trailing elements have one each).
CollectiveContext part_of(const CollectiveContext& context, std::span<const int> members,
                          std::span<const int> group_ranks, int rank, int part) {
  CollectiveContext sub = context;
  sub.members = members;
  sub.caller_ranks = group_ranks;
  sub.rank = rank;
  sub.size = static_cast<int>(members.size());
  sub.step_space = context.step_space / 4;
  sub.step_base = context.step_base + static_cast<std::uint64_t>(part) * sub.step_space;
  return sub;
}

// Block (local place l, host h) of the scratch copy: bundle l holds the blocks of every host's
// rank at place l, by host.
std::uint8_t* bundle_block(std::uint8_t* bundles, const HostLayout& layout, int local, int host, std::size_t block) {
  return bundles +
         (static_cast<std::size_t>(local) * static_cast<std::size_t>(layout.hosts()) + static_cast<std::size_t>(host)) *
             block;
}

}  // namespace

HostLayout::HostLayout(std::span<const int> transport_hosts, std::span<const int> members, int rank, int size) {
  if (transport_hosts.empty() || size < 2) return;
  auto transport_rank = [&](int r) { return members.empty() ? r : members[static_cast<std::size_t>(r)]; };
  // Hosts in the order of their lowest group rank; each host's ranks in group order.
  std::map<int, int> host_index;
  std::vector<int> host_of;  // group rank -> host index
  std::vector<std::vector<int>> by_host;
  for (int r = 0; r < size; ++r) {
    int host = transport_hosts[static_cast<std::size_t>(transport_rank(r))];
    auto [entry, added] = host_index.emplace(host, static_cast<int>(by_host.size()));
    if (added) by_host.emplace_back();
    by_host[static_cast<std::size_t>(entry->second)].push_back(r);
    host_of.push_back(entry->second);
  }
  spanned_hosts_ = static_cast<int>(by_host.size());
  for (const auto& ranks : by_host) largest_host_ = std::max(largest_host_, static_cast<int>(ranks.size()));
  std::vector<int> leaving(by_host.size(), 0);
  for (int r = 0; r < size; ++r) {
    int host = host_of[static_cast<std::size_t>(r)];
    if (host != host_of[0] && first_remote_rank_ < 0) first_remote_rank_ = r;
    if (host != host_of[static_cast<std::size_t>((r + 1) % size)]) ++leaving[static_cast<std::size_t>(host)];
  }
  ring_crossings_ = *std::max_element(leaving.begin(), leaving.end());
  for (int distance = 1; distance < size; distance *= 2) {
    std::fill(leaving.begin(), leaving.end(), 0);
    for (int r = 0; r < size; ++r) {
      int partner = r ^ distance, host = host_of[static_cast<std::size_t>(r)];
      if (partner < size && host_of[static_cast<std::size_t>(partner)] != host)
        ++leaving[static_cast<std::size_t>(host)];
    }
    crossing_pairs_.push_back(*std::max_element(leaving.begin(), leaving.end()));
  }
  std::size_t local = by_host.front().size();
  bool even = std::all_of(by_host.begin(), by_host.end(), [&](const auto& ranks) { return ranks.size() == local; });
  if (!even || by_host.size() < 2 || local < 2) return;
  hosts_ = static_cast<int>(by_host.size());
  local_size_ = static_cast<int>(local);
  host_ = host_index.at(transport_hosts[static_cast<std::size_t>(transport_rank(rank))]);
  const auto& mine = by_host[static_cast<std::size_t>(host_)];
  local_rank_ = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  for (int r : mine) local_members_.push_back(transport_rank(r));
  for (const auto& ranks : by_host) group_ranks_.insert(group_ranks_.end(), ranks.begin(), ranks.end());
  for (const auto& ranks : by_host) {
    cross_group_ranks_.push_back(ranks[static_cast<std::size_t>(local_rank_)]);
    cross_members_.push_back(transport_rank(cross_group_ranks_.back()));
  }
}

void hierarchical_all_reduce(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t count,
                             DType dtype, ReduceOp op, std::size_t chunk_bytes, std::size_t link_chunk_bytes,
                             Algorithm across_algorithm) {
  std::size_t element = element_size(dtype);
  std::size_t local = static_cast<std::size_t>(layout.local_size());
  std::size_t shard = count / local;
  auto* bytes = static_cast<std::uint8_t*>(data);
  // An average sums through the phases and divides once, by the whole group's size.
  ReduceOp combine_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  if (shard > 0) {
    CollectiveContext inside =
        part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 0);
    ring_reduce_scatter(inside, data, shard, dtype, combine_op, chunk_bytes);
    std::uint8_t* mine = bytes + static_cast<std::size_t>(layout.local_rank()) * shard * element;
    CollectiveContext across = part_of(context, layout.cross_members(), layout.cross_group_ranks(), layout.host(), 1);
    if (across_algorithm == Algorithm::HalvingDoubling) {
      halving_doubling_all_reduce(across, mine, shard, dtype, combine_op, link_chunk_bytes);
    } else {
      ring_all_reduce(across, mine, shard, dtype, combine_op, link_chunk_bytes);
    }
    if (op == ReduceOp::Avg) divide(mine, shard, dtype, static_cast<std::size_t>(context.size));
    CollectiveContext gather =
        part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 2);
    ring_all_gather(gather, data, shard * element, chunk_bytes);
  }
  std::size_t tail = count - shard * local;
  if (tail > 0) {
    CollectiveContext whole = context;
    whole.step_space = context.step_space / 4;
    whole.step_base = context.step_base + 3 * whole.step_space;
    ring_all_reduce(whole, bytes + shard * local * element, tail, dtype, op, link_chunk_bytes);
  }
}

void hierarchical_broadcast(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t bytes,
                            int root, std::size_t chunk_bytes, std::size_t link_chunk_bytes) {
  HostLayout::Place from = layout.place_of(root);
  if (layout.local_rank() == from.local) {
    CollectiveContext across = part_of(context, layout.cross_members(), layout.cross_group_ranks(), layout.host(), 0);
    ring_broadcast(across, data, bytes, from.host, link_chunk_bytes);
  }
  CollectiveContext inside =
      part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 1);
  ring_broadcast(inside, data, bytes, from.local, chunk_bytes);
}

void hierarchical_reduce(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t count,
                         DType dtype, ReduceOp op, int root, std::size_t chunk_bytes, std::size_t link_chunk_bytes) {
  HostLayout::Place to = layout.place_of(root);
  bool leader = layout.local_rank() == to.local;  // of its host, towards root
  bool is_root = leader && layout.host() == to.host;
  // An average sums through the phases and divides once, by the whole group's size.
  ReduceOp combine_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  // A leader other than root keeps its input: its host's partial result goes through scratch.
  std::vector<std::uint8_t> scratch;
  void* partial = data;
  if (leader && !is_root) {
    auto* bytes = static_cast<const std::uint8_t*>(data);
    scratch.assign(bytes, bytes + count * element_size(dtype));
    partial = scratch.data();
  }
  CollectiveContext inside =
      part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 0);
  ring_reduce(inside, partial, count, dtype, combine_op, to.local, chunk_bytes);
  if (!leader) return;
  CollectiveContext across = part_of(context, layout.cross_members(), layout.cross_group_ranks(), layout.host(), 1);
  ring_reduce(across, partial, count, dtype, combine_op, to.host, link_chunk_bytes);
  if (is_root && op == ReduceOp::Avg) divide(data, count, dtype, static_cast<std::size_t>(context.size));
}

void hierarchical_all_gather(const CollectiveContext& context, const HostLayout& layout, void* output,
                             const void* input, std::size_t block_bytes, std::size_t chunk_bytes,
                             std::size_t link_chunk_bytes) {
  if (block_bytes == 0) return;
  int hosts = layout.hosts(), local = layout.local_size();
  std::uint8_t* bundles = context.scratch->get(1, block_bytes * static_cast<std::size_t>(hosts * local));
  std::memcpy(bundle_block(bundles, layout, layout.local_rank(), layout.host(), block_bytes), input, block_bytes);
  CollectiveContext across = part_of(context, layout.cross_members(), layout.cross_group_ranks(), layout.host(), 0);
  ring_all_gather(across, bundle_block(bundles, layout, layout.local_rank(), 0, block_bytes), block_bytes,
                  link_chunk_bytes);
  CollectiveContext inside =
      part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 1);
  ring_all_gather(inside, bundles, block_bytes * static_cast<std::size_t>(hosts), chunk_bytes);
  auto* out = static_cast<std::uint8_t*>(output);
  for (int host = 0; host < hosts; ++host) {
    for (int place = 0; place < local; ++place) {
      std::memcpy(out + static_cast<std::size_t>(layout.group_rank(host, place)) * block_bytes,
                  bundle_block(bundles, layout, place, host, block_bytes), block_bytes);
    }
  }
}

void hierarchical_reduce_scatter(const CollectiveContext& context, const HostLayout& layout, void* output,
                                 const void* input, std::size_t block_count, DType dtype, ReduceOp op,
                                 std::size_t chunk_bytes, std::size_t link_chunk_bytes) {
  std::size_t block = block_count * element_size(dtype);
  if (block == 0) return;
  int hosts = layout.hosts(), local = layout.local_size();
  std::uint8_t* bundles = context.scratch->get(1, block * static_cast<std::size_t>(hosts * local));
  const auto* in = static_cast<const std::uint8_t*>(input);
  for (int host = 0; host < hosts; ++host) {
    for (int place = 0; place < local; ++place) {
      std::memcpy(bundle_block(bundles, layout, place, host, block),
                  in + static_cast<std::size_t>(layout.group_rank(host, place)) * block, block);
    }
  }
  ReduceOp combine_op = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  CollectiveContext inside =
      part_of(context, layout.local_members(), layout.local_group_ranks(), layout.local_rank(), 0);
  ring_reduce_scatter(inside, bundles, block_count * static_cast<std::size_t>(hosts), dtype, combine_op, chunk_bytes);
  CollectiveContext across = part_of(context, layout.cross_members(), layout.cross_group_ranks(), layout.host(), 1);
  std::uint8_t* mine = bundle_block(bundles, layout, layout.local_rank(), 0, block);
  ring_reduce_scatter(across, mine, block_count, dtype, combine_op, link_chunk_bytes);
  std::uint8_t* result = bundle_block(bundles, layout, layout.local_rank(), layout.host(), block);
  if (op == ReduceOp::Avg) divide(result, block_count, dtype, static_cast<std::size_t>(context.size));
  std::memcpy(output, result, block);
}

}  // namespace comm::algorithms
