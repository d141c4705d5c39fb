// What the environment and the path decide about a pair's TCP connections: how many a rank opens
// to a peer on another host (striped_stream.hpp; the connecting rank decides, per peer, and says
// so in its handshake), and their socket buffers.
#pragma once

#include <optional>
#include <string>

namespace comm::transport {

constexpr int kMaxSocketStreams = 16;
// Below 64 KiB TCP crawls (each window waits out a delayed acknowledgement, ~200 ms: a 1 MiB
// all_reduce with 4 KiB buffers did not finish in 10 s), so smaller COMM_SOCKET_BUFFERs are refused.
constexpr long long kMinimumSocketBuffer = 64 * 1024;
// The most the rule below picks by itself: past this, more connections mostly add descriptors
// and interleaving (NCCL's own default tops out at 8 sockets per peer on clouds that cap flows).
constexpr int kMaxAutomaticStreams = 8;

struct StreamPlan {
  int count = 1;
  std::string reason;  // for the log: what decided it
};

// COMM_SOCKET_STREAMS (1-16), when set; throws InvalidArgumentError on a bad value.
std::optional<int> requested_streams();
// COMM_SOCKET_BUFFER: bytes of SO_SNDBUF and SO_RCVBUF for data sockets, when set (64 KiB-1 GiB).
std::optional<long long> requested_socket_buffer();

// Enough connections that their windows together cover the bandwidth-delay product of the path:
// ceil(rate x round trip / window), from 1 to kMaxAutomaticStreams.
int streams_for(double bytes_per_second, double round_trip_seconds, double window_bytes);

// The plan for a connection just made on `fd` through `interface`: COMM_SOCKET_STREAMS when
// set; else streams_for() with the round trip TCP measured on the handshake, the link's rate
// (COMM_LINK_GBPS, else the interface's speed, else 10 Gbit/s) and the window one connection
// can open (half its receive buffer: COMM_SOCKET_BUFFER, else net.ipv4.tcp_rmem's maximum).
StreamPlan plan_streams(int fd, const std::string& interface);

}  // namespace comm::transport
