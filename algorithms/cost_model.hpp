// Predicted time of each algorithm of a collective whose group spans hosts: the alpha-beta model
// of the link between hosts (LinkModel: a latency per message, a bandwidth per stream) and of the
// host's own memory, counting per step how many of a host's ranks send across at once (they
// share its link). The tuner runs the fastest; the predictions go into its log line.
#pragma once

#include <array>
#include <cstddef>

#include "algorithms/hierarchical.hpp"
#include "algorithms/link_model.hpp"
#include "comm/types.hpp"
#include "libcomm/base/algorithm.hpp"

namespace comm::algorithms {

struct Prediction {
  Algorithm algorithm = Algorithm::Auto;
  double seconds = 0;
};

struct Predictions {
  std::array<Prediction, 4> items{};
  int count = 0;
  // Algorithm::Auto when the collective has nothing to predict between.
  Prediction best() const;
};

// `bytes` as the tuner counts them (all_gather and reduce_scatter: one rank's block); rings
// across the link pipeline `chunk_bytes`.
Predictions predict(Collective collective, std::size_t bytes, int size, const HostLayout& hosts, const LinkModel& link,
                    std::size_t chunk_bytes);

// The algorithm a hierarchical all_reduce runs among its hosts.
Algorithm across_hosts_algorithm(const HostLayout& hosts);

}  // namespace comm::algorithms
