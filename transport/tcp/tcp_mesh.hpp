// Building the full mesh of TCP connections of a group, through the store.
//
// Each rank listens on its chosen address and publishes it under "tcp/<rank>" with a fresh
// nonce of that listener. A rank connects to every lower rank and accepts every higher one. The
// connecting side opens with a hello (magic, protocol version, both ranks, world size, its
// name, a nonce of its own) and a proof of the job secret over the hello and the listener's
// nonce; the accepting side checks it and answers with its own hello, proved over the
// connector's nonce. So a recorded handshake proves nothing to another listener, and a
// recorded answer nothing to another connection. A connection with a wrong proof, wrong ranks
// or garbage is closed and logged, and the job goes on waiting for its real peers. The listener
// is closed once the mesh is complete, so nothing can connect afterwards.
//
// Before its address, a rank publishes its host identity under "host/<rank>". Rank 0 gathers
// both of every rank into one table that the others read (O(N) store operations, not N^2). A connecting rank
// whose peer is on another host may open several connections to it (socket_tuning.hpp): each
// says in its hello which of how many it is, each is proved alike, and the accepting rank waits
// for all of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <optional>

#include "comm/error.hpp"
#include "comm/store_interface.hpp"
#include "libcomm/base/job_secret.hpp"
#include "transport/socket.hpp"

namespace comm::transport {

struct MeshOptions {
  int rank = 0;
  int size = 1;
  // What handshakes prove: the job's secret (COMM_JOB_TOKEN, from commrun or the user), else a
  // random one agreed through the store, which keeps out only those who cannot read the store.
  std::optional<JobSecret> secret{};
  bool secret_from_user = false;
  std::string route_to_host;  // the store's host, to pick the interface (see interfaces.hpp)
  std::string host{};         // this rank's host identity (set by connect_transport)
  std::chrono::milliseconds timeout{};
  // COMM_CONNECT=lazy: only peers on this host that shared memory reaches (`shared_memory`)
  // connect at init; the others on first use (lazy_connector.hpp), through the listener kept.
  bool connect_lazily = false;
  bool shared_memory = true;
};

// A connection the mesh accepted while this rank was still connecting that the connections made
// on first use must carry on: a lower rank's request to be connected (it may ask as soon as its
// own init is through, while this rank still waits for the others), or a hello not complete when
// the wait ended. Refused or closed, the asking rank would take this one for dead.
struct EarlyConnection {
  Socket socket;
  std::string from;
  std::vector<std::uint8_t> received;  // the hello's bytes so far
};

struct Mesh {
  std::vector<Socket> sockets;  // [rank] invalid
  // [peer]: the connections after the first, in their agreed order (striped with the first).
  std::vector<std::vector<Socket>> extra_sockets;
  std::vector<std::string> peer_names;  // "rank 3 (host:pid)"
  std::vector<std::string> hosts;       // [rank]: its host identity (MeshOptions::host)
  std::string local_address;
  // Kept when connections are made lazily: the listener, its nonce, every rank's published
  // "address nonce".
  Socket listener;
  Nonce listener_nonce{};
  std::vector<std::string> addresses;
  std::vector<EarlyConnection> early;
};

// `on_failure` hears of a failure first, while this rank's connections are still open (to tell
// the job through the store before the peers see them close). `look` runs every 100 ms or so
// while this rank waits for higher ranks to connect, and throws when the job has failed
// elsewhere (a rank that died before it published its address is found that way).
Mesh connect_mesh(Store& store, const MeshOptions& options,
                  const std::function<void(const Error&)>& on_failure = nullptr,
                  const std::function<void()>& look = nullptr);

// Throws PeerClosedError naming the first rank whose connection has closed (its process died,
// or gave up), saying it happened while `phase` ("the shared-memory pairs were being set up").
// Bytes a fast peer has already sent are left unread.
void check_peers_alive(const Mesh& mesh, int rank, const std::string& phase);

// The name this process gives itself in handshakes: "rank R (host:pid)".
std::string process_name(int rank);

}  // namespace comm::transport
