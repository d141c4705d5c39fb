#include "libcomm/base/algorithm.hpp"

#include <string>

#include "comm/error.hpp"

namespace comm {

const char* to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::Tree: return "tree";
    case Algorithm::RecursiveDoubling: return "recursive_doubling";
    case Algorithm::Direct: return "direct";
    case Algorithm::Dissemination: return "dissemination";
    case Algorithm::SharedMemory: return "shared_memory";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::HalvingDoubling: return "halving_doubling";
    case Algorithm::Bruck: return "bruck";
  }
  return "unknown algorithm";
}

Algorithm parse_algorithm_name(std::string_view name, const char* source) {
  for (Algorithm algorithm :
       {Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling, Algorithm::Direct,
        Algorithm::Dissemination, Algorithm::SharedMemory, Algorithm::Hierarchical, Algorithm::HalvingDoubling,
        Algorithm::Bruck}) {
    if (name == to_string(algorithm)) return algorithm;
  }
  if (name == "rd") return Algorithm::RecursiveDoubling;
  if (name == "shm") return Algorithm::SharedMemory;
  throw InvalidArgumentError(
      std::string(source) + " is '" + std::string(name) +
          "'; known algorithms: auto, ring, tree, recursive_doubling (rd), direct, dissemination, "
          "shared_memory (shm), hierarchical, halving_doubling, bruck",
      ErrorContext{.op = "tuner"});
}

}  // namespace comm
