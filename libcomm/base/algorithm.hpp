// The algorithms the library's collectives run, by name: what the tuner chooses among, what a
// call's fingerprint records, and what the algorithm table (algorithms/algorithm_table.hpp)
// registers. Internal: programs name an algorithm by the string parse_algorithm reads (a call's
// `algorithm` argument, COMM_ALGO, the benches' -a), so a new algorithm changes no public header.
#pragma once

#include <string_view>

namespace comm {

// How a collective moves its data. Auto lets the tuner pick from the collective, the message
// size, the group size and the transport (COMM_ALGO overrides Auto for every call).
// SharedMemory: all_reduce and barrier through one segment every rank maps, for groups whose
// ranks all share one host over shared memory (docs/collectives.md lists which collective has which).
// Hierarchical: all_reduce inside each host, then among hosts, for groups with the same number
// (more than one) of ranks on each of several hosts. HalvingDoubling: all_reduce as a reduce-scatter
// by recursive halving and an all-gather by recursive doubling. Bruck: all_to_all_v in log2 n
// exchanges, for many ranks and small blocks.
enum class Algorithm {
  Auto,
  Ring,
  Tree,
  RecursiveDoubling,
  Direct,
  Dissemination,
  SharedMemory,
  Hierarchical,
  HalvingDoubling,
  Bruck
};

const char* to_string(Algorithm algorithm);
// "ring" -> Algorithm::Ring, as COMM_ALGO, the calls' `algorithm` and the benches' -a spell them
// (also "rd", "shm"; "" is Auto); throws InvalidArgumentError naming `source` and listing the
// names otherwise.
// Inline for the common names "" and "auto" (the benches' default): every call passes here.
Algorithm parse_algorithm_name(std::string_view name, const char* source);
inline Algorithm parse_algorithm(std::string_view name, const char* source = "the algorithm") {
  if (name.empty() || name == "auto") return Algorithm::Auto;
  return parse_algorithm_name(name, source);
}

}  // namespace comm
