// What the tuner knows of the link between hosts: one message's latency and one stream's
// bandwidth, each way. COMM_LINK_GBPS (and COMM_LINK_LATENCY_US) give it; otherwise rank 0 and
// the first rank on another host measure it once when the world group is made (probe_link), and
// every rank receives rank 0's figures, so that every rank's tuner decides alike.
#pragma once

#include <optional>

#include "algorithms/collective_context.hpp"

namespace comm::algorithms {

struct LinkModel {
  double latency_seconds = 0;   // one small message, one way
  double bytes_per_second = 0;  // one stream, one way; 0: unknown (the job runs on one host)
  const char* source = "unknown";
  bool known() const { return bytes_per_second > 0; }
};

// From COMM_LINK_GBPS (gigabits per second) and COMM_LINK_LATENCY_US (default 50 us), when the
// first is set; a bad value is an InvalidArgumentError naming the variable.
std::optional<LinkModel> link_from_environment();

// Measures the link between group ranks 0 and `peer` (on another host): eight-byte round trips
// and transfers each way at once, grown until one lasts long enough to time (the fastest after a
// warm-up counts), capped so that a slow link costs init at most about half a second.
// Collective over the whole group: every rank calls it with the same peer and returns rank 0's
// figures.
LinkModel probe_link(const CollectiveContext& context, int peer);

}  // namespace comm::algorithms
