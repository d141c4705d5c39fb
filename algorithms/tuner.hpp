// The tuner: which algorithm a collective call runs, and in what chunks. A call may ask for an
// algorithm; otherwise COMM_ALGO (ring|tree|recursive_doubling|...) applies where the collective
// has it; otherwise, for a group that spans hosts, the cost model of the link (cost_model.hpp)
// picks the fastest, and within one host the crossovers measured on this project's machines
// decide (docs/results/collectives.md). Rings across hosts pipeline chunks sized for the
// link. With COMM_LOG_LEVEL=info each choice is logged once per (collective, power-of-two size
// class), with the predictions behind it.
#pragma once

#include <cstddef>

#include "algorithms/hierarchical.hpp"
#include "algorithms/link_model.hpp"
#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm::algorithms {

struct TunerQuery {
  Collective collective;
  std::size_t bytes;  // per rank, as the collective's busbw counts it
  int size;
  Algorithm requested = Algorithm::Auto;
  int rank = -1;                      // for errors
  bool shared_memory = false;         // every rank of the group on this host, over shm: SharedMemory is usable
  const HostLayout* hosts = nullptr;  // the group's ranks by host; null: all on one host
  const LinkModel* link = nullptr;    // the link between hosts; null or unknown: not measured
};

// What a call runs: the algorithm, the ring chunk of its flat phases, and for a hierarchical
// all_reduce what runs among the hosts and in what chunks.
struct Choice {
  Algorithm algorithm = Algorithm::Ring;
  std::size_t chunk_bytes = 0;
  std::size_t link_chunk_bytes = 0;
  Algorithm across_hosts = Algorithm::Ring;
};

// The algorithm to run. A requested algorithm the collective lacks is an InvalidArgumentError.
Choice choose(const TunerQuery& query);

// The pipelining chunk of the ring algorithms within a host (COMM_RING_CHUNK bytes overrides).
std::size_t ring_chunk_bytes();
// The chunk for rings and halvings over the link between hosts: the transport's eager size
// (64 KiB) up to 10 Gbit/s, so that no chunk waits for a handshake across a loaded link, then
// 50 us of the link (tuner.cpp has the measurements).
// COMM_RING_CHUNK overrides; an unknown link gets ring_chunk_bytes().
std::size_t link_chunk_bytes(const LinkModel& link);

// Reads the tuner's variables (COMM_ALGO, COMM_RING_CHUNK, COMM_LINK_*) now: init_process_group
// calls it, so a bad value is an InvalidArgumentError there rather than in the first collective.
void read_environment();

}  // namespace comm::algorithms
