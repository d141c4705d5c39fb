#include "transport/tcp/lazy_connector.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "libcomm/base/log.hpp"
#include "transport/tcp/socket_stream.hpp"
#include "transport/tcp/socket_tuning.hpp"

namespace comm::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLazyHelloTimeout = std::chrono::seconds(5);
constexpr std::uint64_t kListenerKey = 0;

spdlog::logger& connector_log() { return log::get(log::Subsystem::Transport); }

std::vector<std::uint8_t> bytes_of(const Hello& hello) {
  auto begin = reinterpret_cast<const std::uint8_t*>(&hello);
  return {begin, begin + sizeof hello};
}

}  // namespace

LazyConnector::LazyConnector(MeshOptions options, Socket listener, const Nonce& listener_nonce,
                             std::vector<std::string> addresses, std::vector<bool> connected,
                             std::vector<EarlyConnection> early)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      listener_nonce_(listener_nonce),
      addresses_(std::move(addresses)),
      peers_(static_cast<std::size_t>(options_.size), PeerState::Unconnected) {
  for (int peer = 0; peer < options_.size; ++peer) {
    if (peer == options_.rank || connected[peer]) peers_[peer] = PeerState::Connected;
  }
  epoll_.add(listener_.fd(), EPOLLIN, kListenerKey);
  for (auto& connection : early) {
    Handshake& handshake = accepted(std::move(connection.socket), std::move(connection.from));
    auto it = std::prev(handshakes_.end());  // step() may add the connection back after it
    handshake.received = std::min(connection.received.size(), sizeof(Hello));
    std::memcpy(&handshake.in, connection.received.data(), handshake.received);
    // A complete hello is a request: answered now by connecting back, which is all it asks
    // (its socket is held, and the connection's events move it on from here).
    if (handshake.received < sizeof(Hello)) continue;
    std::vector<Connected> none;
    std::vector<Lost> lost;
    if (!step(handshake, none, lost)) {
      release(handshake);
      handshakes_.erase(it);
    }
  }
}

int LazyConnector::connections() const {
  return static_cast<int>(std::count(peers_.begin(), peers_.end(), PeerState::Connected)) - 1;
}

void LazyConnector::want(int peer) {
  if (peer < 0 || peer >= options_.size || peers_[peer] != PeerState::Unconnected) return;
  peers_[peer] = PeerState::Underway;
  start_outbound(peer, peer > options_.rank);
}

void LazyConnector::start_outbound(int peer, bool request) {
  const std::string& published = addresses_[peer];
  auto space = published.rfind(' ');
  auto their_nonce = parse_nonce(space == std::string::npos ? "" : published.substr(space + 1));
  Handshake handshake;
  handshake.peer = peer;
  handshake.request = request;
  handshake.deadline = Clock::now() + options_.timeout;
  handshake.from = published.substr(0, space);
  SocketAddress address = SocketAddress::parse(handshake.from);
  Hello hello = make_hello(options_, peer, 0, 1, *their_nonce, request ? kRequestPurpose : kConnectPurpose);
  handshake.nonce = nonce_of(hello);
  handshake.out = bytes_of(hello);
  handshake.socket = Socket(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  set_no_delay(handshake.socket.fd());
  int status = ::connect(handshake.socket.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
  static_cast<void>(status);  // made, under way, or refused: the first send says which
  handshake.stage = Stage::Sending;
  connector_log().debug("{} rank {} at {} (first use)", request ? "asking to be connected by" : "connecting to", peer,
                        handshake.from);
  handshakes_.push_back(std::move(handshake));
  watch(handshakes_.back());
}

void LazyConnector::watch(Handshake& handshake) {
  if (!handshake.socket.valid()) return;
  bool reading =
      handshake.stage == Stage::Receiving || handshake.stage == Stage::Waiting || handshake.stage == Stage::Holding;
  std::uint32_t events = reading ? EPOLLIN | EPOLLRDHUP : EPOLLOUT;
  auto key = reinterpret_cast<std::uint64_t>(&handshake);
  try {
    epoll_.modify(handshake.socket.fd(), events, key);
  } catch (const Error&) {
    epoll_.add(handshake.socket.fd(), events, key);
  }
}

void LazyConnector::refuse(const Handshake& handshake, const std::string& reason) {
  auto verdict = refusals_.take();
  if (verdict.unsaid > 0) {
    connector_log().warn("refused {} more connections in the last {} s without a word here", verdict.unsaid,
                         refusals_.window().count());
  }
  if (verdict.write) connector_log().warn("refused a connection from {}: {}", handshake.from, reason);
}

bool LazyConnector::closed_by_peer(const Handshake& handshake) {
  if (!handshake.socket.valid()) return true;
  std::uint8_t byte = 0;
  ssize_t n = ::recv(handshake.socket.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void LazyConnector::accept_all() {
  while (listener_.valid()) {
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&from), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    Socket socket(fd);
    SocketAddress address;
    address.storage = from;
    address.length = length;
    set_no_delay(socket.fd());
    accepted(std::move(socket), address.to_string());
  }
}

LazyConnector::Handshake& LazyConnector::accepted(Socket socket, std::string from) {
  Handshake handshake;
  handshake.socket = std::move(socket);
  handshake.outbound = false;
  handshake.stage = Stage::Receiving;
  handshake.from = std::move(from);
  handshake.deadline = Clock::now() + kLazyHelloTimeout;
  handshakes_.push_back(std::move(handshake));
  watch(handshakes_.back());
  return handshakes_.back();
}

bool LazyConnector::step(Handshake& handshake, std::vector<Connected>& connected, std::vector<Lost>& lost) {
  auto give_up = [&](const std::string& reason) {
    if (handshake.outbound) {
      peers_[handshake.peer] = PeerState::Gone;
      lost.push_back({handshake.peer, reason});
    } else {
      refuse(handshake, reason);
    }
    return false;
  };
  if (handshake.stage == Stage::Waiting) {
    // Our request was delivered: the higher rank connects back, then closes the request's
    // socket; closed before it has, the higher rank has ended.
    if (peers_[handshake.peer] == PeerState::Connected) return false;
    if (closed_by_peer(handshake)) {
      return give_up("rank " + std::to_string(handshake.peer) + " at " + handshake.from +
                     " was asked to connect to this rank and ended before it had: look at its output for why");
    }
    if (Clock::now() > handshake.deadline) {
      return give_up("rank " + std::to_string(handshake.peer) + " at " + handshake.from +
                     " was asked to connect to this rank and has not: is it stuck, or gone?");
    }
    return true;
  }
  if (handshake.stage == Stage::Holding) {
    // A lower rank's request, held open until this rank's connection to it is made (or fails);
    // the lower rank closing it first has given up or ended, which the connection finds out.
    return peers_[handshake.peer] == PeerState::Underway && !closed_by_peer(handshake);
  }
  while (handshake.stage == Stage::Sending || handshake.stage == Stage::Answering) {
    // A connection still being made says EAGAIN or ENOTCONN: EPOLLOUT comes when it is made.
    ssize_t n = ::send(handshake.socket.fd(), handshake.out.data() + handshake.sent,
                       handshake.out.size() - handshake.sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOTCONN)) break;
    if (n < 0 && handshake.outbound && (errno == ECONNREFUSED || errno == ECONNRESET || errno == EPIPE)) {
      return give_up("rank " + std::to_string(handshake.peer) + " at " + handshake.from + " refuses connections (" +
                     std::strerror(errno) + "): its process has ended; look at its output for why");
    }
    if (n < 0) {
      return give_up("the handshake with " +
                     (handshake.peer >= 0 ? "rank " + std::to_string(handshake.peer) : "a peer") + " at " +
                     handshake.from + " failed: " + std::strerror(errno));
    }
    handshake.sent += static_cast<std::size_t>(n);
    if (handshake.sent < handshake.out.size()) continue;
    if (handshake.stage == Stage::Answering) {  // we accepted a higher rank: it is connected
      peers_[handshake.peer] = PeerState::Connected;
      hand_over(handshake, connected);
      return false;
    }
    if (handshake.request) {  // the peer connects back; this socket tells if it dies first
      handshake.stage = Stage::Waiting;
      watch(handshake);
      return step(handshake, connected, lost);
    }
    handshake.stage = Stage::Receiving;
    handshake.received = 0;
    watch(handshake);
  }
  if (handshake.stage == Stage::Receiving) {
    while (handshake.received < sizeof(Hello)) {
      ssize_t n = ::recv(handshake.socket.fd(), reinterpret_cast<std::uint8_t*>(&handshake.in) + handshake.received,
                         sizeof(Hello) - handshake.received, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      if (n <= 0) {
        return give_up(handshake.outbound ? "rank " + std::to_string(handshake.peer) + " at " + handshake.from +
                                                " closed the connection during the handshake: it has ended"
                                          : std::string("closed before completing the handshake"));
      }
      handshake.received += static_cast<std::size_t>(n);
    }
    if (handshake.received == sizeof(Hello)) {
      if (handshake.outbound) {  // the lower rank's answer
        std::string reason = check_hello(handshake.in, options_, handshake.peer, handshake.nonce, kAcceptPurpose);
        if (!reason.empty())
          return give_up("rank " + std::to_string(handshake.peer) + " answered the handshake wrongly: " + reason);
        peers_[handshake.peer] = PeerState::Connected;
        hand_over(handshake, connected);
        return false;
      }
      // An accepted connection: a higher rank connecting, or a lower rank asking us to.
      std::string reason = check_hello(handshake.in, options_, -1, listener_nonce_, kConnectPurpose);
      int peer = handshake.in.from_rank;
      if (reason.empty()) {
        if (peer < options_.rank) return give_up("rank " + std::to_string(peer) + " may only ask, not connect");
        if (peers_[peer] == PeerState::Connected || peers_[peer] == PeerState::Gone) {
          return give_up("a second claim to be rank " + std::to_string(peer) + ", which this rank " +
                         (peers_[peer] == PeerState::Gone ? "has lost" : "is connected to") +
                         " already: a replayed handshake, or a process of this job running twice?");
        }
        handshake.peer = peer;
        peers_[peer] = PeerState::Underway;
        handshake.out = bytes_of(make_hello(options_, peer, 0, 1, nonce_of(handshake.in), kAcceptPurpose));
        handshake.sent = 0;
        handshake.stage = Stage::Answering;
        watch(handshake);
        return step(handshake, connected, lost);
      }
      if (check_hello(handshake.in, options_, -1, listener_nonce_, kRequestPurpose).empty()) {
        if (peer > options_.rank)
          return give_up("rank " + std::to_string(peer) + " asked to be connected by a lower rank");
        want(peer);  // nothing if connected or under way already
        handshake.peer = peer;
        handshake.stage = Stage::Holding;
        watch(handshake);
        return step(handshake, connected, lost);
      }
      return give_up(reason);
    }
  }
  if (Clock::now() > handshake.deadline) {
    return give_up(handshake.outbound ? "rank " + std::to_string(handshake.peer) + " at " + handshake.from +
                                            " did not complete the handshake in time"
                                      : std::string("sent no complete handshake within 5 s"));
  }
  return true;
}

void LazyConnector::advance(std::vector<Connected>& connected, std::vector<Lost>& lost) {
  accept_all();
  for (auto it = handshakes_.begin(); it != handshakes_.end();) {
    if (step(*it, connected, lost)) {
      ++it;
    } else {
      release(*it);
      it = handshakes_.erase(it);
    }
  }
}

void LazyConnector::stop() {
  for (auto& handshake : handshakes_) release(handshake);
  handshakes_.clear();
  if (listener_.valid()) {
    epoll_.remove(listener_.fd());
    listener_.close();
  }
}

void LazyConnector::hand_over(Handshake& handshake, std::vector<Connected>& connected) {
  std::string name = peer_name_of(handshake.in);
  connected.push_back({handshake.peer, std::make_unique<SocketStream>(release(handshake), handshake.peer, name), name});
}

Socket LazyConnector::release(Handshake& handshake) {
  if (handshake.socket.valid()) epoll_.remove(handshake.socket.fd());
  return std::move(handshake.socket);
}

}  // namespace comm::transport
