// tcp_store_server::Server, TcpStoreServer's implementation: the key-value map, the parked requests and the acceptor,
// on the server's one I/O thread (sessions, one per connection, are in tcp_store_session.cpp).
//
// A parked request is registered under one of its missing keys; when that key appears the
// request looks for its next missing key, and is answered when none is left or its timer
// fires first.
#include "rendezvous/tcp_store_server.hpp"

#include <cerrno>

#include <algorithm>

#include "libcomm/base/close_on_exec.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"
#include "rendezvous/store_format.hpp"

namespace comm {
namespace {

using namespace tcp_store_protocol;
using asio::ip::tcp;
using tcp_store_server::Session;
using Clock = std::chrono::steady_clock;

// More simultaneous connections than any job needs (a rank holds one or two); beyond it new ones
// are told why at their hello and closed, so a flood cannot take every descriptor of the process
// hosting the store, and a rank that comes too late learns the real cause.
constexpr std::size_t kMaxClients = 4096;
// Connections that have not yet said hello (or proved the secret) at once; past it the oldest is
// closed. A rank proves itself within milliseconds; a stranger holding connections open gets no
// further than this, so it cannot keep the job's ranks out (with a job secret: at all).
constexpr std::size_t kMaxPendingClients = 256;
// What the values of a store may hold in all (COMM_STORE_MEMORY_MIB sets it): a rank's writes are
// small; a client sending 64 MiB values without end must not take the host's memory.
constexpr long long kDefaultMemoryCapMib = 256;
constexpr std::size_t kMaxLastWordBytes = 64 * 1024;

spdlog::logger& logger() { return log::get(log::Subsystem::Rendezvous); }

Bytes status_frame(ResponseStatus status) { return FrameWriter(static_cast<std::uint8_t>(status)).finish(); }

Bytes integer_frame(std::int64_t value) {
  return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Integer)).i64(value).finish();
}

Bytes value_frame(std::span<const std::uint8_t> value) {
  return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Value)).bytes(value).finish();
}

std::chrono::milliseconds read_timeout(FrameReader& request) {
  std::int64_t milliseconds = request.i64();
  if (milliseconds < 0) throw ProtocolViolation{"negative timeout"};
  return std::min(std::chrono::milliseconds(milliseconds), kMaxStoreTimeout);
}

std::string read_key(FrameReader& request) {
  std::string key = request.string();
  if (key.empty() || key.size() > kMaxStoreKeyBytes) {
    throw ProtocolViolation{"key of " + std::to_string(key.size()) + " bytes"};
  }
  return key;
}

std::span<const std::uint8_t> read_value(FrameReader& request) {
  auto value = request.bytes();
  if (value.size() > kMaxStoreValueBytes) {
    throw ProtocolViolation{"value of " + std::to_string(value.size()) + " bytes"};
  }
  return value;
}

}  // namespace

tcp_store_server::Server::Server(std::uint16_t port, const std::string& host, std::optional<JobSecret> secret)
    : secret_(std::move(secret)),
      acceptor_(io_),
      accept_retry_(io_),
      memory_cap_bytes_(static_cast<std::size_t>(
                            environment::get_integer_in("COMM_STORE_MEMORY_MIB", 1, 1 << 20,
                                                        "the memory (MiB) the store's keys and values may take in all")
                                .value_or(kDefaultMemoryCapMib))
                        << 20) {
  try {
    tcp::endpoint endpoint;
    if (host.empty() || host == "::" || host == "0.0.0.0") {
      // Every interface; IPv6 with IPv4-mapped addresses where the kernel has IPv6.
      bool dual_stack = host != "0.0.0.0";
      endpoint = tcp::endpoint(dual_stack ? tcp::v6() : tcp::v4(), port);
      std::error_code ec;
      acceptor_.open(endpoint.protocol(), ec);
      if (ec) {
        endpoint = tcp::endpoint(tcp::v4(), port);
        acceptor_.open(endpoint.protocol());
      } else if (dual_stack) {
        acceptor_.set_option(asio::ip::v6_only(false));
      }
    } else {
      std::error_code not_literal;
      auto address = asio::ip::make_address(host, not_literal);
      if (not_literal) {  // a host name: the address it resolves to first, as clients connect to
        tcp::resolver resolver(io_);
        address = resolver.resolve(host, std::to_string(port)).begin()->endpoint().address();
      }
      endpoint = tcp::endpoint(address, port);
      acceptor_.open(endpoint.protocol());
    }
    if (!set_close_on_exec(acceptor_.native_handle())) {
      throw std::system_error(errno, std::generic_category(), "fcntl(FD_CLOEXEC)");
    }
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
  } catch (const std::system_error& error) {
    std::string where = (host.empty() ? std::string("every interface") : host) + " port " + std::to_string(port);
    if (error.code() == asio::error::address_in_use) {
      throw IoError("cannot start the store server: " + where +
                        " is already in use; pick another MASTER_PORT, stop the process holding it, "
                        "or let commrun choose a free port",
                    ErrorContext{.op = "TcpStoreServer"});
    }
    throw IoError("cannot start the store server on " + where + ": " + error.code().message(),
                  ErrorContext{.op = "TcpStoreServer"});
  }
  accept();
  thread_ = std::thread([this] {
    try {
      io_.run();
    } catch (const std::exception& error) {
      // Handlers catch their own failures; reaching here is a bug worth a loud message.
      logger().critical("store server: I/O thread stopped: {}", error.what());
    }
  });
  logger().info("store server listening on port {} ({})", port_,
                secret_ ? "clients must prove they hold the job secret" : "without a job secret: open to any client");
}

tcp_store_server::Server::~Server() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
  parked_.clear();
}

void tcp_store_server::Server::accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, say: keep serving the clients we have and try again shortly.
      logger().warn("store server: accept failed: {}; retrying", ec.message());
      accept_retry_.expires_after(std::chrono::milliseconds(50));
      accept_retry_.async_wait([this](std::error_code wait_ec) {
        if (!wait_ec) accept();
      });
      return;
    }
    make_room_for_pending();
    auto session = std::make_shared<Session>(std::move(socket), *this);
    if (clients_.load() > kMaxClients) {
      session->refuse_at_hello(
          "the store on port " + std::to_string(port_) + " already holds " + std::to_string(kMaxClients) +
          " connections, more than any job's ranks need: something else is holding connections to it (a flood?)" +
          (secret_ ? std::string("")
                   : "; the store runs without a job secret, so anyone who can reach it may: give the job a secret "
                     "(COMM_JOB_TOKEN) so that strangers are refused"));
    }
    pending_.push_back(session);
    session->start();
    accept();
  });
}

void tcp_store_server::Server::make_room_for_pending() {
  std::erase_if(pending_, [](const std::weak_ptr<Session>& weak) {
    auto session = weak.lock();
    return !session || !session->is_open() || session->proved();
  });
  while (pending_.size() >= kMaxPendingClients) {
    if (auto oldest = pending_.front().lock()) {
      oldest->close("closed to make room: " + std::to_string(kMaxPendingClients) +
                    " connections were waiting to say hello or prove the job secret, this one the longest");
    }
    pending_.pop_front();
  }
}

std::string tcp_store_server::Server::over_memory_cap(const std::string& key, std::size_t value_bytes) const {
  const Bytes* held = find(key);
  std::size_t after = held_bytes_ - (held ? key.size() + held->size() : 0) + key.size() + value_bytes;
  if (after <= memory_cap_bytes_) return {};
  return "the store would hold " + std::to_string(after >> 20) + " MiB with this value of " +
         std::to_string(value_bytes) + " bytes under '" + key + "', past its cap of " +
         std::to_string(memory_cap_bytes_ >> 20) +
         " MiB (COMM_STORE_MEMORY_MIB on the process hosting the store raises it); is something writing more "
         "than the job needs?";
}

void tcp_store_server::Server::warn_dropped(const std::string& peer, const std::string& reason) {
  auto verdict = drop_warnings_.take();
  if (verdict.unsaid > 0) {
    logger().warn("store server: {} more clients dropped in the last {} s without a word here", verdict.unsaid,
                  drop_warnings_.window().count());
  }
  if (verdict.write) logger().warn("store server: dropping client {}: {}", peer, reason);
}

std::vector<std::string> tcp_store_server::Server::missing(const std::vector<std::string>& keys) const {
  return store_format::missing_keys(values_, keys);
}

const Bytes* tcp_store_server::Server::find(const std::string& key) const {
  return store_format::find_value(values_, key);
}

void tcp_store_server::Server::put(const std::string& key, Bytes value) {
  if (const Bytes* held = find(key)) held_bytes_ -= key.size() + held->size();
  held_bytes_ += key.size() + value.size();
  auto [slot, created] = values_.insert_or_assign(key, std::move(value));
  if (created) notify_created(key);
}

void tcp_store_server::Server::say_last_word(const std::string& peer, const std::string& key, Bytes value) {
  if (values_.contains(key)) return;
  logger().info("store server: client {} has gone; writing its last word under {}", peer, key);
  put(key, std::move(value));
}

void tcp_store_server::Server::notify_created(const std::string& key) {
  auto found = parked_.find(key);
  if (found == parked_.end()) return;
  auto waiting = std::move(found->second);
  parked_.erase(found);
  for (auto& request : waiting) {
    if (request->answered) continue;
    if (!park(request)) answer(request);
  }
}

bool tcp_store_server::Server::park(const std::shared_ptr<ParkedRequest>& request) {
  for (bool rescanned = false;; rescanned = true) {
    auto& keys = request->keys;
    while (request->next_key < keys.size() && values_.contains(keys[request->next_key])) ++request->next_key;
    if (request->next_key < keys.size()) {
      parked_[keys[request->next_key]].push_back(request);
      return true;
    }
    if (rescanned) return false;
    request->next_key = 0;  // one full pass more, in case an earlier key was deleted meanwhile
  }
}

void tcp_store_server::Server::answer(const std::shared_ptr<ParkedRequest>& request) {
  request->answered = true;
  request->timer->cancel();
  auto session = request->session.lock();
  if (!session || !session->is_open()) return;
  if (request->returns_value) {
    session->respond(value_frame(*find(request->keys.front())));
  } else {
    session->respond(status_frame(ResponseStatus::Ok));
  }
}

Bytes tcp_store_server::Server::execute(RequestType type, FrameReader& request, const std::shared_ptr<Session>& session,
                                        bool& parked) {
  switch (type) {
    case RequestType::Set: {
      std::string key = read_key(request);
      auto value = read_value(request);
      request.expect_end();
      if (std::string refused = over_memory_cap(key, value.size()); !refused.empty()) {
        return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Failure)).bytes(refused).finish();
      }
      put(key, Bytes(value.begin(), value.end()));
      return status_frame(ResponseStatus::Ok);
    }
    case RequestType::Get:
    case RequestType::Wait: {
      bool is_get = type == RequestType::Get;
      std::vector<std::string> keys = is_get ? std::vector<std::string>{read_key(request)} : request.keys();
      auto timeout = read_timeout(request);
      request.expect_end();
      auto pending = std::make_shared<ParkedRequest>();
      pending->session = session;
      pending->keys = std::move(keys);
      pending->returns_value = is_get;
      pending->timer = std::make_unique<asio::steady_timer>(io_);
      if (!park(pending)) {
        return is_get ? value_frame(*find(pending->keys.front())) : status_frame(ResponseStatus::Ok);
      }
      parked = true;
      pending->timer->expires_after(timeout);
      pending->timer->async_wait([this, pending](std::error_code ec) {
        if (ec || pending->answered) return;
        pending->answered = true;
        auto& waiting = parked_[pending->keys[pending->next_key]];
        std::erase(waiting, pending);
        if (waiting.empty()) parked_.erase(pending->keys[pending->next_key]);
        if (auto owner = pending->session.lock(); owner && owner->is_open()) {
          owner->respond(
              FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Timeout)).keys(missing(pending->keys)).finish());
        }
      });
      return {};
    }
    case RequestType::Add: {
      std::string key = read_key(request);
      std::int64_t delta = request.i64();
      request.expect_end();
      try {
        std::int64_t value = store_format::added_counter(key, find(key), delta);
        put(key, store_format::encode_counter(value));
        return integer_frame(value);
      } catch (const Error& error) {
        return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Failure)).bytes(error.message()).finish();
      }
    }
    case RequestType::CompareSet: {
      std::string key = read_key(request);
      auto expected = read_value(request);
      auto desired = read_value(request);
      request.expect_end();
      if (std::string refused = over_memory_cap(key, desired.size()); !refused.empty()) {
        return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Failure)).bytes(refused).finish();
      }
      Bytes result =
          store_format::compare_and_set(find(key), expected, desired, [&](const Bytes& value) { put(key, value); });
      return value_frame(result);
    }
    case RequestType::Check: {
      auto keys = request.keys();
      request.expect_end();
      return integer_frame(missing(keys).empty() ? 1 : 0);
    }
    case RequestType::Delete: {
      std::string key = read_key(request);
      request.expect_end();
      const Bytes* held = find(key);
      if (held) held_bytes_ -= key.size() + held->size();
      return integer_frame(values_.erase(key) > 0 ? 1 : 0);
    }
    case RequestType::LastWord: {
      std::string key = read_key(request);
      auto value = read_value(request);
      request.expect_end();
      // A last word says why a rank went: a few hundred bytes. Many connections each holding
      // large ones would be memory outside the store's cap.
      if (value.size() > kMaxLastWordBytes) {
        return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Failure))
            .bytes("a last word may hold at most " + std::to_string(kMaxLastWordBytes) + " bytes")
            .finish();
      }
      if (!session->set_last_word(key, Bytes(value.begin(), value.end()))) {
        return FrameWriter(static_cast<std::uint8_t>(ResponseStatus::Failure))
            .bytes("a client may leave at most " + std::to_string(kMaxLastWords) + " last words")
            .finish();
      }
      return status_frame(ResponseStatus::Ok);
    }
    case RequestType::NumKeys: request.expect_end(); return integer_frame(static_cast<std::int64_t>(values_.size()));
    case RequestType::Hello: throw ProtocolViolation{"hello sent twice"};
    case RequestType::Authenticate: throw ProtocolViolation{"authenticated twice"};
  }
  throw ProtocolViolation{"unknown request type " + std::to_string(static_cast<int>(type))};
}

TcpStoreServer::TcpStoreServer(std::uint16_t port, std::string host, std::optional<std::string> job_secret)
    : server_(std::make_unique<tcp_store_server::Server>(port, host, resolve_job_secret(job_secret))) {}

TcpStoreServer::~TcpStoreServer() = default;

std::uint16_t TcpStoreServer::port() const { return server_->port(); }

std::size_t TcpStoreServer::client_count() const { return server_->client_count(); }

}  // namespace comm
