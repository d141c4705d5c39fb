// Connections made on first use (COMM_CONNECT=lazy): a rank connects to a peer over TCP the
// first time it sends to it or waits for it, so a job whose collectives use rings, trees or
// halving-doubling holds O(log N) connections per rank instead of N - 1 (issue 31).
//
// Only the higher rank of a pair ever connects, as in the full mesh (tcp_mesh.hpp), with the
// same proved hellos: so two ranks that want each other at the same moment never make two
// connections. A lower rank that wants a higher one sends it a request instead (a hello of
// its own purpose), and the higher rank connects back. Both keep the request's socket open until
// that connection is made: so a rank that dies before it has connected back (or while it is
// asked) closes it, and the lower rank hears of the death at once, not after the timeout. The listener stays open
// while the transport lives; what connects to it is authenticated like the mesh's peers, and a
// stranger, a second claim to a connected rank's place, or a hello that does not come in time
// is refused and logged (a few lines however many).
//
// Everything here is non-blocking: the transport's progress thread sleeps on fd() and calls
// advance(), under the transport's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "libcomm/base/job_secret.hpp"
#include "libcomm/base/warning_budget.hpp"
#include "transport/epoll_set.hpp"
#include "transport/medium.hpp"
#include "transport/socket.hpp"
#include "transport/tcp/mesh_hello.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace comm::transport {

class LazyConnector final : public PeerConnector {
 public:
  // `listener` and `addresses` ("address nonce" of every rank) come from the mesh; `connected`
  // marks the peers it connected at init; `early`, what the mesh accepted that is ours to answer.
  LazyConnector(MeshOptions options, Socket listener, const Nonce& listener_nonce, std::vector<std::string> addresses,
                std::vector<bool> connected, std::vector<EarlyConnection> early = {});
  LazyConnector(const LazyConnector&) = delete;
  LazyConnector& operator=(const LazyConnector&) = delete;

  // Readable when advance() has something to do.
  int fd() const override { return epoll_.fd(); }
  // Sets about connecting `peer` (a connection to a lower rank, a request to a higher one);
  // nothing when it is connected or under way.
  void want(int peer) override;
  // Moves every handshake on as far as it goes without blocking; appends what completed.
  void advance(std::vector<Connected>& connected, std::vector<Lost>& lost) override;
  // How many peers this rank is connected to, made lazily or at init.
  int connections() const;
  // Handshakes under way (advance() has work even if fd() is not polled).
  bool busy() const override { return !handshakes_.empty(); }
  // Closes the listener and drops the handshakes: the transport has stopped.
  void stop() override;

 private:
  // Sending our hello (or request), Answering a higher rank's, Receiving a hello or answer,
  // Waiting for a higher rank we asked to connect back (on the request's socket, which it
  // closes once connected or when it dies), Holding a lower rank's request until this rank has
  // connected back to it.
  enum class Stage { Sending, Answering, Receiving, Waiting, Holding };
  struct Handshake {
    int peer = -1;  // -1 until an accepted connection's hello names it
    Socket socket;
    Stage stage = Stage::Sending;
    bool outbound = true;  // we connected; else the listener accepted it
    bool request = false;  // a request to a higher rank: Waiting once sent
    std::vector<std::uint8_t> out;
    std::size_t sent = 0;
    Hello in{};
    std::size_t received = 0;
    Nonce nonce{};  // of our hello, which the answer proves
    std::string from;
    std::chrono::steady_clock::time_point deadline;
  };
  void start_outbound(int peer, bool request);
  // False once the handshake is over (completed, failed or refused).
  bool step(Handshake& handshake, std::vector<Connected>& connected, std::vector<Lost>& lost);
  void accept_all();
  // A connection the listener accepted, awaiting its hello (in the list, watched).
  Handshake& accepted(Socket socket, std::string from);
  // Whether the peer closed the socket (or the connection broke): EOF or an error, no bytes.
  static bool closed_by_peer(const Handshake& handshake);
  void watch(Handshake& handshake);
  // The handshake's socket, out of the epoll set.
  Socket release(Handshake& handshake);
  // A completed handshake's connection, as the stream the transport takes.
  void hand_over(Handshake& handshake, std::vector<Connected>& connected);
  void refuse(const Handshake& handshake, const std::string& reason);

  MeshOptions options_;
  Socket listener_;
  Nonce listener_nonce_;
  std::vector<std::string> addresses_;
  enum class PeerState { Unconnected, Underway, Connected, Gone };
  std::vector<PeerState> peers_;
  std::list<Handshake> handshakes_;  // a list: the epoll keys point at its elements
  EpollSet epoll_;
  WarningBudget refusals_{10, std::chrono::seconds(10)};
};

}  // namespace comm::transport
