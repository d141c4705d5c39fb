// TCP as a medium: a pair's bytes go over its mesh connection (or several, striped). It reaches
// every peer, so it is the automatic choice's last resort.
#pragma once

#include "transport/medium.hpp"

namespace comm::transport {

MediumEntry tcp_medium();

}  // namespace comm::transport
