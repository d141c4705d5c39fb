// The tuner: which algorithm a collective call runs. A call may ask for one; otherwise
// COMM_ALGO (ring|tree|recursive_doubling|direct|dissemination) applies where the collective
// has that algorithm; otherwise the crossovers measured on this project's machines decide
// (docs/results/collectives.md). With COMM_LOG_LEVEL=info each choice is logged once per
// (collective, power-of-two size class).
#pragma once

#include <cstddef>

#include "comm/types.hpp"

namespace comm::algorithms {

bool has_algorithm(Collective collective, Algorithm algorithm);

struct TunerQuery {
  Collective collective;
  std::size_t bytes;  // per rank, as the collective's busbw counts it
  int size;
  Algorithm requested = Algorithm::Auto;
  int rank = -1;                  // for errors
  bool shared_memory = false;     // every rank of the group on this host, over shm: SharedMemory is usable
  bool hierarchical = false;      // several hosts, the same number (> 1) of ranks on each: Hierarchical is usable
  bool contiguous_hosts = false;  // and each host holds a consecutive power-of-two block of ranks
};

// The algorithm to run. A requested algorithm the collective lacks is an InvalidArgumentError.
Algorithm choose(const TunerQuery& query);

// The pipelining chunk of the ring algorithms (COMM_RING_CHUNK bytes overrides).
std::size_t ring_chunk_bytes();

// Reads the tuner's variables (COMM_ALGO, COMM_RING_CHUNK) now: init_process_group calls it, so
// a bad value is an InvalidArgumentError there rather than in the first collective.
void read_environment();

}  // namespace comm::algorithms
