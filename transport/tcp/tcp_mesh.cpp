#include "transport/tcp/tcp_mesh.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>

#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "libcomm/base/warning_budget.hpp"
#include "transport/tcp/interfaces.hpp"
#include "transport/tcp/mesh_addresses.hpp"
#include "transport/tcp/mesh_hello.hpp"
#include "transport/tcp/socket_tuning.hpp"

namespace comm::transport {
namespace {

using Clock = std::chrono::steady_clock;

// How long a connection that has not said hello may hold a place before it is dropped.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
// How often a rank waiting for higher ranks to connect asks whether the job failed elsewhere.
constexpr auto kLookInterval = std::chrono::milliseconds(100);

spdlog::logger& logger() { return log::get(log::Subsystem::Transport); }

[[noreturn]] void fail(const std::string& message, int peer = -1) {
  throw IoError(message, ErrorContext{.peer = peer, .op = "transport.tcp.connect"});
}

Socket open_listener(const SocketAddress& address) {
  Socket listener(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.valid()) fail(std::string("socket: ") + std::strerror(errno));
  set_option(listener.fd(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
  if (::bind(listener.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    fail("cannot listen on " + address.to_string() + ": " + std::strerror(errno));
  }
  if (::listen(listener.fd(), 1024) != 0) fail(std::string("listen: ") + std::strerror(errno));
  set_nonblocking(listener.fd());
  return listener;
}

SocketAddress bound_address(const Socket& socket) {
  SocketAddress address;
  address.length = sizeof address.storage;
  ::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address.storage), &address.length);
  return address;
}

// Socket buffers of a connection within this host. A small send buffer keeps what the sender
// copies into the kernel in cache until the receiver copies it out; a receive window of 1 MiB
// lets a ring segment of up to 1 MiB go in one write instead of waiting on the reader for each
// quarter (measured in docs/results/collectives.md: 1 MiB all_reduce 3.1-3.4 GB/s against
// 1.6-2.7 with 256 KiB both ways, 64 MiB one way 4.0-5.1 against 3.1-4.5).
constexpr long long kWithinHostSendBuffer = 256 * 1024;
constexpr long long kWithinHostReceiveBuffer = 1024 * 1024;

// Whether both ends of a connection are addresses of this host (the same address, as over
// loopback or the host's own interface): its bytes never leave the machine.
bool within_host(const Socket& socket) {
  SocketAddress peer;
  peer.length = sizeof peer.storage;
  if (::getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&peer.storage), &peer.length) != 0) return false;
  SocketAddress local = bound_address(socket);
  auto host_of = [](const SocketAddress& address) {
    std::string text = address.to_string();
    return text.substr(0, text.rfind(':'));
  };
  return host_of(peer) == host_of(local);
}

// Connects to a lower rank (its hello follows, send_hello).
Socket connect_to(const SocketAddress& address, int peer, Clock::time_point deadline) {
  auto pause = std::chrono::milliseconds(5);
  std::string last_error;
  int refusals = 0;
  while (Clock::now() < deadline) {
    // Non-blocking connect: an address that swallows SYNs must not hold us past the deadline.
    Socket socket(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    int status = ::connect(socket.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    if (status != 0 && errno == EINPROGRESS) {
      pollfd watched{socket.fd(), POLLOUT, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (::poll(&watched, 1, static_cast<int>(std::clamp<long long>(left, 0, 10000))) == 1) {
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
        status = error == 0 ? 0 : -1;
        errno = error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (status == 0) return socket;
    last_error = std::strerror(errno);
    // The rank listened before it published this address and closes its listener only after
    // every higher rank (this one too) has connected: a refusal means its process is gone.
    if (errno == ECONNREFUSED && ++refusals >= 4) {
      throw PeerClosedError("rank " + std::to_string(peer) + " died while the ranks were connecting: its address " +
                                address.to_string() +
                                " refuses connections; look at its output for why it ended (the other ranks stop "
                                "here instead of waiting out the timeout)",
                            ErrorContext{.peer = peer, .op = "init_process_group"});
    }
    if (errno != ECONNREFUSED) refusals = 0;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  fail("could not connect to rank " + std::to_string(peer) + " at " + address.to_string() + " (" + last_error +
           "); check that this host can reach it (firewall, COMM_SOCKET_IFNAME)",
       peer);
}

// Our hello on connection `index` of `count` to a lower rank; its answer is read later, so that
// every rank first gets on with accepting its higher ranks (no rank waits on one that waits on
// it). Returns the nonce of our hello, which the answer must prove.
Nonce send_hello(const Socket& socket, const SocketAddress& address, const Nonce& listener_nonce, int peer, int index,
                 int count, Clock::time_point deadline, const MeshOptions& options) {
  Hello hello = make_hello(options, peer, index, count, listener_nonce, kConnectPurpose);
  std::string error;
  if (!send_all(socket.fd(), {reinterpret_cast<const std::uint8_t*>(&hello), sizeof hello}, deadline, error)) {
    fail("sending the handshake to rank " + std::to_string(peer) + " at " + address.to_string() + ": " + error, peer);
  }
  return nonce_of(hello);
}

// The index of the first socket whose peer has closed the connection (its process died, or
// gave up), or -1. Bytes a fast peer has already sent are left unread.
int first_closed(const std::vector<const Socket*>& sockets) {
  std::vector<pollfd> watched;
  std::vector<int> indices;
  for (std::size_t i = 0; i < sockets.size(); ++i) {
    if (sockets[i] == nullptr || !sockets[i]->valid()) continue;
    watched.push_back({sockets[i]->fd(), POLLRDHUP, 0});
    indices.push_back(static_cast<int>(i));
  }
  if (watched.empty() || ::poll(watched.data(), watched.size(), 0) <= 0) return -1;
  for (std::size_t i = 0; i < watched.size(); ++i) {
    if ((watched[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return indices[i];
  }
  return -1;
}

// Whether the pair connects at init: always, unless connections are made on first use; then
// a peer on this host that shared memory will reach (its stream keeps the socket), and the
// neighbours in rank order (rank +-1, around): every rank is watched by two that hold a
// connection to it, so a death is seen at once and its cause passed on through the store
// (during init) or by the neighbours stopping (after).
bool connects_at_init(const MeshOptions& options, const Mesh& mesh, int peer) {
  if (!options.connect_lazily) return true;
  if (options.shared_memory && mesh.hosts[peer] == options.host) return true;
  return peer == (options.rank + 1) % options.size || peer == (options.rank + options.size - 1) % options.size;
}

// Counts the ranks whose own connections (to every lower rank) are complete: one counter that
// a waiting rank reads in one operation, where a key per rank cost each of them N reads a look.
const std::string kConnectedCount = "mesh/connected";
// Set by the rank whose count completes it: what the waiting ranks look for.
const std::string kAllConnected = "mesh/connected/all";

// Accepts the connections of the higher ranks, and keeps listening until every rank has said
// (kConnectedCount) that its own connections are complete: a second claim to a rank's place that
// comes meanwhile (a stranger took it first) is caught here and named on every rank. Strangers
// are dropped; a connection that closes meanwhile (to a lower rank, or from a higher one
// already accepted) is a rank that died, and that ends the wait at once.
void accept_higher_ranks(Store& store, Socket& listener, const Nonce& listener_nonce, Mesh& mesh,
                         const std::vector<Socket>& lower, const MeshOptions& options, Clock::time_point deadline,
                         const std::function<void(const Error&)>& on_failure, const std::function<void()>& look) {
  struct Pending {
    Socket socket;
    std::string from;
    Clock::time_point hello_deadline;
    Hello hello{};
    std::size_t received = 0;
  };
  std::vector<Pending> pending;
  // [peer]: how many connections it said it opens (0: none heard yet).
  std::vector<int> announced(static_cast<std::size_t>(options.size), 0);
  auto slot = [&](int peer, int index) -> Socket& {
    return index == 0 ? mesh.sockets[peer] : mesh.extra_sockets[peer][static_cast<std::size_t>(index - 1)];
  };
  auto missing = [&] {
    std::vector<int> ranks;
    for (int peer = options.rank + 1; peer < options.size; ++peer) {
      if (!connects_at_init(options, mesh, peer)) continue;
      bool complete = announced[peer] > 0;
      for (int index = 0; complete && index < announced[peer]; ++index) complete = slot(peer, index).valid();
      if (!complete) ranks.push_back(peer);
    }
    return ranks;
  };
  // A flood of strangers on the port is told in a few lines, not one per connection.
  WarningBudget refusals(10, std::chrono::seconds(10));
  auto say_unsaid = [&](std::size_t unsaid) {
    if (unsaid > 0) {
      logger().warn("refused {} more connections to {} in the last {} s without a word here", unsaid,
                    mesh.local_address, refusals.window().count());
    }
  };
  auto keep_for_later = [&](Pending& connection) {
    auto bytes = reinterpret_cast<const std::uint8_t*>(&connection.hello);
    mesh.early.push_back({std::move(connection.socket), connection.from, {bytes, bytes + connection.received}});
  };
  bool confirmed = false;
  int confirmation_pause = 2;  // ms
  auto next_look = Clock::now() + kLookInterval;
  while (!confirmed) {
    if (missing().empty()) {
      confirmed = store.check({kAllConnected});
      if (confirmed) break;
    }
    auto now = Clock::now();
    if (look && now >= next_look) {
      look();
      next_look = now + kLookInterval;
    }
    if (now >= deadline) {
      std::string ranks;
      for (int peer : missing()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(peer);
      if (ranks.empty()) {
        throw TimeoutError(
            "timed out waiting for the higher ranks to confirm their connections to " + mesh.local_address,
            ErrorContext{.op = "transport.tcp.connect"});
      }
      throw TimeoutError("timed out waiting for rank(s) " + ranks + " to connect to " + mesh.local_address +
                             "; they may be unable to reach this address (firewall, COMM_SOCKET_IFNAME)",
                         ErrorContext{.op = "transport.tcp.connect"});
    }
    std::vector<const Socket*> connected;
    for (int peer = 0; peer < options.size; ++peer) {
      connected.push_back(peer < options.rank ? &lower[static_cast<std::size_t>(peer)] : &mesh.sockets[peer]);
    }
    if (int peer = first_closed(connected); peer >= 0) {
      PeerClosedError error("rank " + std::to_string(peer) +
                                " died (its connection closed) while the ranks were connecting; the other ranks stop "
                                "here instead of waiting out the timeout: look at its output for why it ended",
                            ErrorContext{.rank = options.rank, .peer = peer, .op = "init_process_group"});
      // Told while the half-made connections of higher ranks are still open: closing them
      // first would make those ranks blame this one.
      if (on_failure) on_failure(error);
      throw error;
    }
    std::vector<pollfd> watched{{listener.fd(), POLLIN, 0}};
    for (auto& connection : pending) watched.push_back({connection.socket.fd(), POLLIN, 0});
    // Once every higher rank is in, only their confirmations are awaited: look again soon.
    // Once every higher rank is in, only the store is awaited: looked at after 2 ms, then less
    // and less often (at most every 50 ms), so a thousand waiting ranks do not flood it.
    int pause = 100;
    if (missing().empty()) {
      pause = confirmation_pause;
      confirmation_pause = std::min(confirmation_pause * 2, 50);
    }
    ::poll(watched.data(), watched.size(), pause);
    if (watched[0].revents & POLLIN) {
      sockaddr_storage from{};
      socklen_t length = sizeof from;
      int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&from), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        SocketAddress address;
        address.storage = from;
        address.length = length;
        pending.push_back({Socket(fd), address.to_string(), Clock::now() + kHelloTimeout});
      }
    }
    for (std::size_t i = 0; i < pending.size();) {
      Pending& connection = pending[i];
      bool drop = false;
      std::string reason;
      ssize_t n =
          ::recv(connection.socket.fd(), reinterpret_cast<std::uint8_t*>(&connection.hello) + connection.received,
                 sizeof(Hello) - connection.received, 0);
      if (n > 0) connection.received += static_cast<std::size_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop = true;
        reason = "closed before completing the handshake";
      } else if (connection.received == sizeof(Hello) && options.connect_lazily &&
                 check_hello(connection.hello, options, -1, listener_nonce, kRequestPurpose).empty()) {
        keep_for_later(connection);  // the lazy connector answers it
        drop = true;
      } else if (connection.received == sizeof(Hello)) {
        reason = check_hello(connection.hello, options, -1, listener_nonce, kConnectPurpose);
        int peer = connection.hello.from_rank;
        int index = connection.hello.stream_index, count = connection.hello.stream_count;
        if (reason.empty() && peer <= options.rank)
          reason = "rank " + std::to_string(peer) + " should not connect here";
        if (reason.empty() && announced[peer] != 0 && announced[peer] != count) {
          reason = "rank " + std::to_string(peer) + " announced " + std::to_string(announced[peer]) +
                   " connections, then " + std::to_string(count);
        }
        if (reason.empty() && announced[peer] == 0) {
          announced[peer] = count;
          mesh.extra_sockets[peer].resize(static_cast<std::size_t>(count - 1));
        }
        if (reason.empty() && slot(peer, index).valid()) {
          // Two proved claims to one place: one of them is not the rank. Without the user's
          // secret the handshake proves only a token agreed through the store, which any
          // program that can read the store has. That is the cause to report on every rank,
          // not the rank whose connection then fails.
          MismatchError impostor(
              "two processes claimed to be rank " + std::to_string(peer) + " (connection " + std::to_string(index) +
                  ") on " + mesh.local_address + ": " + mesh.peer_names[peer] + " and " +
                  peer_name_of(connection.hello) + " from " + connection.from + ". " +
                  (options.secret_from_user
                       ? std::string("Both proved the job secret: is a process of this job running twice?")
                       : std::string("The job runs without a secret, so any program that can read its store can "
                                     "pose as a rank: give every rank the same COMM_JOB_TOKEN (commrun does)")),
              ErrorContext{.rank = options.rank, .peer = peer, .op = "init_process_group"});
          if (on_failure) on_failure(impostor);
          throw impostor;
        }
        if (reason.empty()) {
          Hello answer = make_hello(options, peer, index, count, nonce_of(connection.hello), kAcceptPurpose);
          std::string error;
          if (!send_all(connection.socket.fd(), {reinterpret_cast<const std::uint8_t*>(&answer), sizeof answer},
                        deadline, error)) {
            reason = "could not answer its handshake: " + error;
          } else {
            mesh.peer_names[peer] = peer_name_of(connection.hello);
            slot(peer, index) = std::move(connection.socket);
          }
        }
        drop = true;
      } else if (Clock::now() > connection.hello_deadline) {
        drop = true;
        reason = "sent no complete handshake within 5 s";
      }
      if (drop) {
        if (!reason.empty()) {
          auto verdict = refusals.take();
          say_unsaid(verdict.unsaid);
          if (verdict.write)
            logger().warn("refused a connection from {} to {}: {}", connection.from, mesh.local_address, reason);
        }
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  say_unsaid(refusals.unsaid());
  // Hellos still arriving belong to the connections made on first use, when there are any.
  if (options.connect_lazily) {
    for (auto& connection : pending) keep_for_later(connection);
  }
}

}  // namespace

std::string process_name(int rank) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "rank " + std::to_string(rank) + " (" + host + ":" + std::to_string(::getpid()) + ")";
}

void check_peers_alive(const Mesh& mesh, int rank, const std::string& phase) {
  std::vector<const Socket*> sockets;
  for (const auto& socket : mesh.sockets) sockets.push_back(&socket);
  int peer = first_closed(sockets);
  if (peer < 0) return;
  throw PeerClosedError(mesh.peer_names[static_cast<std::size_t>(peer)] + " died (its connection closed) while " +
                            phase + "; the other ranks stop here instead of waiting out the timeout: look at rank " +
                            std::to_string(peer) + "'s output for why it ended",
                        ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"});
}

namespace {

void build_connections(Store& store, const MeshOptions& options, Clock::time_point deadline, Mesh& mesh,
                       std::vector<Socket>& lower, const std::function<void(const Error&)>& on_failure,
                       const std::function<void()>& look) {
  requested_streams();  // a bad COMM_SOCKET_STREAMS is an error on every rank (rank 0 connects to none), at once
  LocalAddress local = choose_local_address(options.route_to_host);
  Socket listener = open_listener(local.address);
  mesh.local_address = bound_address(listener).to_string();
  // A nonce per listener: a hello recorded from any other mesh proves nothing here.
  Nonce listener_nonce = random_nonce();
  store.set("host/" + std::to_string(options.rank), options.host);
  store.set("tcp/" + std::to_string(options.rank), mesh.local_address + " " + nonce_text(listener_nonce));
  logger().info("listening for peers on {} ({})", mesh.local_address, local.interface);
  AddressBook book = gather_addresses(store, options, mesh.local_address + " " + nonce_text(listener_nonce));
  mesh.hosts = book.hosts;

  // [peer][connection]: the nonces of our hellos, which the answers must prove.
  std::vector<std::vector<Nonce>> sent(options.rank);
  for (int peer = 0; peer < options.rank; ++peer) {
    if (!connects_at_init(options, mesh, peer)) continue;
    const std::string& published = book.addresses[peer];
    auto space = published.rfind(' ');
    auto their_nonce = parse_nonce(space == std::string::npos ? "" : published.substr(space + 1));
    if (!their_nonce)
      fail("rank " + std::to_string(peer) + " published a malformed address: '" + published + "'", peer);
    SocketAddress address = SocketAddress::parse(published.substr(0, space));
    lower[peer] = connect_to(address, peer, deadline);
    // Published before its address: a peer on another host may get several connections.
    int count = 1;
    if (mesh.hosts[peer] != options.host) {
      StreamPlan plan = plan_streams(lower[peer].fd(), local.interface);
      count = plan.count;
      logger().info("{} connection{} to rank {} on another host: {}", count, count == 1 ? "" : "s", peer, plan.reason);
    }
    sent[peer].push_back(send_hello(lower[peer], address, *their_nonce, peer, 0, count, deadline, options));
    for (int index = 1; index < count; ++index) {
      mesh.extra_sockets[peer].push_back(connect_to(address, peer, deadline));
      sent[peer].push_back(
          send_hello(mesh.extra_sockets[peer].back(), address, *their_nonce, peer, index, count, deadline, options));
    }
  }
  for (int peer = 0; peer < options.rank; ++peer) {
    for (std::size_t index = 0; index < sent[peer].size(); ++index) {
      const Socket& socket = index == 0 ? lower[peer] : mesh.extra_sockets[peer][index - 1];
      Hello answer{};
      std::string error;
      if (!receive_all(socket.fd(), {reinterpret_cast<std::uint8_t*>(&answer), sizeof answer}, deadline, error)) {
        fail("rank " + std::to_string(peer) + " did not answer the handshake (" + error +
                 "); a rank of another job, or an old address in the store?",
             peer);
      }
      std::string reason = check_hello(answer, options, peer, sent[peer][index], kAcceptPurpose);
      if (reason.empty() && (answer.stream_index != static_cast<int>(index) ||
                             answer.stream_count != static_cast<int>(sent[peer].size()))) {
        reason = "it answered for connection " + std::to_string(answer.stream_index) + " of " +
                 std::to_string(answer.stream_count) + " on connection " + std::to_string(index) + " of " +
                 std::to_string(sent[peer].size());
      }
      if (!reason.empty()) fail("rank " + std::to_string(peer) + " answered the handshake wrongly: " + reason, peer);
      mesh.peer_names[peer] = peer_name_of(answer);
    }
  }
  // This rank's own connections are complete (the lower ranks answered): a higher rank may stop
  // listening for it, and a stranger claiming its place from now on is caught by the lower ranks.
  if (store.add(kConnectedCount, 1) == options.size) store.set(kAllConnected, "1");
  accept_higher_ranks(store, listener, listener_nonce, mesh, lower, options, deadline, on_failure, look);
  for (int peer = 0; peer < options.rank; ++peer) mesh.sockets[peer] = std::move(lower[peer]);
  if (!options.connect_lazily) {
    listener.close();
    return;
  }
  // The other peers connect on first use (lazy_connector.hpp), through this listener.
  mesh.listener = std::move(listener);
  mesh.listener_nonce = listener_nonce;
  mesh.addresses = std::move(book.addresses);
  for (int peer = 0; peer < options.size; ++peer) {
    if (peer != options.rank && !mesh.sockets[peer].valid()) {
      mesh.peer_names[peer] =
          "rank " + std::to_string(peer) + " (" + mesh.addresses[peer].substr(0, mesh.addresses[peer].rfind(' ')) + ")";
    }
  }
}

void set_buffers(Mesh& mesh) {
  // COMM_SOCKET_BUFFER (bytes) fixes both socket buffer sizes. Otherwise a connection within
  // this host gets the sizes above; between hosts the kernel's autotuning sizes them for the
  // path's bandwidth-delay product.
  auto buffer_bytes = requested_socket_buffer().value_or(0);
  auto set_buffer = [](const Socket& socket, int option, long long wanted) {
    if (wanted <= 0) return;
    int bytes = static_cast<int>(std::min<long long>(wanted, 1 << 30));
    set_option(socket.fd(), SOL_SOCKET, option, bytes, option == SO_SNDBUF ? "SO_SNDBUF" : "SO_RCVBUF");
  };
  auto set_up = [&](const Socket& socket) {
    if (!socket.valid()) return;
    set_no_delay(socket.fd());
    bool local = buffer_bytes <= 0 && within_host(socket);
    set_buffer(socket, SO_SNDBUF, buffer_bytes > 0 ? buffer_bytes : local ? kWithinHostSendBuffer : 0);
    set_buffer(socket, SO_RCVBUF, buffer_bytes > 0 ? buffer_bytes : local ? kWithinHostReceiveBuffer : 0);
  };
  for (const auto& socket : mesh.sockets) set_up(socket);
  for (const auto& extras : mesh.extra_sockets) {
    for (const auto& socket : extras) set_up(socket);
  }
}

}  // namespace

Mesh connect_mesh(Store& store, const MeshOptions& options, const std::function<void(const Error&)>& on_failure,
                  const std::function<void()>& look) {
  auto deadline = Clock::now() + options.timeout;
  Mesh mesh;
  mesh.sockets.resize(options.size);
  mesh.extra_sockets.resize(options.size);
  mesh.peer_names.resize(options.size);
  mesh.peer_names[options.rank] = process_name(options.rank);
  mesh.hosts.assign(1, options.host);
  if (options.size == 1) return mesh;
  // Out here, so that they are still open when a failure is told (on_failure): a rank that
  // closed its connections first would be taken for the cause by the ranks it leaves.
  std::vector<Socket> lower(options.rank);
  try {
    build_connections(store, options, deadline, mesh, lower, on_failure, look);
  } catch (const Error& error) {
    if (on_failure) on_failure(error);
    throw;
  }
  set_buffers(mesh);
  return mesh;
}

}  // namespace comm::transport
