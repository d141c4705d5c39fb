// Hierarchical collectives, for groups whose ranks sit on several hosts with several on each:
// the data crosses the slow link between hosts once, among the ranks that have the same place
// on their hosts, while each host's ranks combine and share it over the fast local medium.
//
// all_reduce of n elements over H hosts of L ranks: (1) a ring reduce-scatter inside each host
// leaves local rank l with the host's sum of shard l (n/L elements); (2) a ring all_reduce of
// shard l among the H ranks of local rank l, one per host, makes it the group's; (3) a ring
// all_gather inside each host hands every rank every shard. Each rank sends 2(n/L)(H-1)/H bytes
// across hosts instead of the flat ring's 2n(HL-1)/(HL) through its neighbour, and the shards
// come out of (2) bitwise identical on every host. The n mod L trailing elements take a flat
// ring all_reduce of the whole group.
//
// broadcast chains from root among the ranks at root's local place, one per host, then inside
// each host; reduce is its mirror. The message crosses each host's link once, wherever the
// group's ranks sit (the flat chain does only where hosts hold consecutive ranks).
//
// all_gather and reduce_scatter go the other way round, so that each block crosses between hosts
// once: all_gather gathers first among the ranks of one local place across hosts, then inside each
// host; reduce_scatter reduces first inside each host, then across. Both work on a copy laid out by
// (local place, host) in scratch and move blocks to or from group-rank order locally.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm::algorithms {

// A group's ranks by host, as transport ranks, from the group's point of view.
class HostLayout {
 public:
  HostLayout() = default;
  // `transport_hosts[t]`: the host of transport rank t (Transport::hosts()); `members`: group
  // rank -> transport rank (empty: the identity); `rank`, `size`: this rank and the group's size.
  HostLayout(std::span<const int> transport_hosts, std::span<const int> members, int rank, int size);

  // The group spans more than one host with the same number, more than one, of its ranks on each.
  bool usable() const { return hosts_ > 1 && local_size_ > 1; }
  // Whatever the layout: how many hosts the group spans, the most ranks any one holds, and the
  // lowest group rank on another host than group rank 0 (-1: none), for the tuner's cost model.
  int spanned_hosts() const { return spanned_hosts_; }
  int largest_host() const { return largest_host_; }
  int first_remote_rank() const { return first_remote_rank_; }
  // The most ranks of one host whose partner at distance 2^bit (rank xor 2^bit, as recursive
  // doubling and halving-doubling pair them) is on another host; and the most ring neighbours
  // (rank -> rank+1) of one host on another host.
  int crossing_pairs(int bit) const { return crossing_pairs_[static_cast<std::size_t>(bit)]; }
  int ring_crossings() const { return ring_crossings_; }
  int hosts() const { return hosts_; }
  int local_size() const { return local_size_; }
  int local_rank() const { return local_rank_; }
  int host() const { return host_; }
  // Transport ranks of this host's members of the group, by local rank.
  std::span<const int> local_members() const { return local_members_; }
  // Transport ranks of the group's ranks with this local rank, one per host, by host.
  std::span<const int> cross_members() const { return cross_members_; }
  // The same ranks as the group numbers them.
  std::span<const int> local_group_ranks() const {
    return std::span<const int>(group_ranks_)
        .subspan(static_cast<std::size_t>(host_ * local_size_), static_cast<std::size_t>(local_size_));
  }
  std::span<const int> cross_group_ranks() const { return cross_group_ranks_; }
  // The group rank at local place `local` of host `host`.
  int group_rank(int host, int local) const {
    return group_ranks_[static_cast<std::size_t>(host * local_size_ + local)];
  }
  struct Place {
    int host, local;
  };
  // Where group rank `rank` is: its host and its local place there.
  Place place_of(int rank) const {
    auto index = static_cast<int>(std::find(group_ranks_.begin(), group_ranks_.end(), rank) - group_ranks_.begin());
    return {index / local_size_, index % local_size_};
  }

 private:
  int hosts_ = 1, local_size_ = 1, local_rank_ = 0, host_ = 0;
  int spanned_hosts_ = 1, largest_host_ = 1, first_remote_rank_ = -1, ring_crossings_ = 0;
  std::vector<int> crossing_pairs_;  // by bit of the distance
  std::vector<int> local_members_, cross_members_, cross_group_ranks_;
  std::vector<int> group_ranks_;  // by host, then local place
};

// The phases inside a host pipeline `chunk_bytes`, those across hosts `link_chunk_bytes`.
//
// In place on data (count elements); the result is bitwise identical on every rank. Needs
// layout.usable(). Among the hosts runs `across` (Ring or HalvingDoubling).
void hierarchical_all_reduce(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t count,
                             DType dtype, ReduceOp op, std::size_t chunk_bytes, std::size_t link_chunk_bytes,
                             Algorithm across = Algorithm::Ring);
// From root: a pipelined chain among the ranks at root's local place, one per host (the message
// crosses each host's link once, however the group's ranks are placed), then a chain inside each host.
void hierarchical_broadcast(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t bytes,
                            int root, std::size_t chunk_bytes, std::size_t link_chunk_bytes);
// The mirror: a chain inside each host towards the rank at root's local place, then a chain
// among those ranks towards root. data: this rank's input, and on root the result; other ranks
// keep their input (a host's partial result goes through scratch).
void hierarchical_reduce(const CollectiveContext& context, const HostLayout& layout, void* data, std::size_t count,
                         DType dtype, ReduceOp op, int root, std::size_t chunk_bytes, std::size_t link_chunk_bytes);
// output: size() blocks of block_bytes in group-rank order; input: this rank's block (it may be
// output's block rank).
void hierarchical_all_gather(const CollectiveContext& context, const HostLayout& layout, void* output,
                             const void* input, std::size_t block_bytes, std::size_t chunk_bytes,
                             std::size_t link_chunk_bytes);
// input: size() blocks of block_count elements in group-rank order, left as it was (unless output
// is one of its blocks); output: the reduction of every rank's block rank().
void hierarchical_reduce_scatter(const CollectiveContext& context, const HostLayout& layout, void* output,
                                 const void* input, std::size_t block_count, DType dtype, ReduceOp op,
                                 std::size_t chunk_bytes, std::size_t link_chunk_bytes);

}  // namespace comm::algorithms
