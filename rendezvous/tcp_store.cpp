// TcpStore: the client side. Each call borrows a connection from a small pool (opening one
// when all are busy), sends one request frame and reads one response frame, under a deadline.
// Blocking calls park on the server, which answers with a Timeout status at the call's
// timeout; the client's own deadline is that plus a grace period, for a server that stalls.
#include <asio.hpp>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>

#include "comm/store.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/close_on_exec.hpp"
#include "libcomm/base/duration_text.hpp"
#include "libcomm/base/job_secret.hpp"
#include "libcomm/base/log.hpp"
#include "rendezvous/store_format.hpp"
#include "rendezvous/tcp_store_protocol.hpp"

namespace comm {
namespace {

using namespace tcp_store_protocol;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kServerGrace = std::chrono::seconds(10);

std::string endpoint_text(const std::string& host, std::uint16_t port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

class TcpStore::Client {
 public:
  // `server`: the one this process hosts, if it does; it goes after the connections to it.
  Client(std::string host, std::uint16_t port, std::chrono::milliseconds timeout, std::optional<JobSecret> secret,
         std::unique_ptr<TcpStoreServer> server)
      : server_(std::move(server)), host_(std::move(host)), port_(port), timeout_(timeout), secret_(std::move(secret)) {
    release(connect());  // fail now, in the constructor, when no server can be reached
  }

  const std::string& host() const { return host_; }
  std::uint16_t port() const { return port_; }
  bool hosts_server() const { return server_ != nullptr; }

  // Sends a request and returns the response body (status byte first).
  Bytes request(const Bytes& frame, const char* op, std::chrono::milliseconds server_timeout,
                const std::vector<std::string>& keys) {
    auto connection = acquire();
    Bytes body = exchange(*connection, frame, op, server_timeout, keys);
    release(std::move(connection));
    return body;
  }

  // Last words travel on a connection of their own, kept while any is registered: the pool's
  // connections come and go (one whose call timed out is dropped), and each going would speak.
  bool leave_last_word(const std::string& key, const Bytes& frame) {
    std::lock_guard lock(last_words_mutex_);
    if (!last_words_connection_) last_words_connection_ = connect();
    Bytes body = exchange_last_words(frame, "store.leave_last_word");
    FrameReader reply(body);
    if (static_cast<ResponseStatus>(reply.type()) != ResponseStatus::Ok) {
      throw InvalidArgumentError(reply.string(), ErrorContext{.op = "store.leave_last_word"});
    }
    last_words_.insert(key);
    return true;
  }

  void withdraw_last_word(const std::string& key, const Bytes& frame) {
    std::lock_guard lock(last_words_mutex_);
    if (!last_words_.contains(key)) return;
    exchange_last_words(frame, "store.withdraw_last_word");
    last_words_.erase(key);
    if (last_words_.empty()) last_words_connection_.reset();  // nothing left to say: a plain close
  }

  std::string where() const { return endpoint_text(host_, port_); }

  // Runs one request and hands the reply, positioned after the status byte, to `parse`.
  template <class Parse>
  auto call(const Bytes& frame, const char* op, std::chrono::milliseconds server_timeout,
            const std::vector<std::string>& keys, Parse&& parse) {
    Bytes body = request(frame, op, server_timeout, keys);
    FrameReader reader(body);
    try {
      return parse(reader);
    } catch (const ProtocolViolation& violation) {
      throw IoError("store server at " + where() + " sent a malformed reply: " + violation.reason,
                    ErrorContext{.op = op});
    }
  }

 private:
  struct Connection {
    asio::io_context io;
    tcp::socket socket{io};

    // Runs one asynchronous operation to completion or the deadline (then it is cancelled).
    template <class Start>
    std::error_code run(Clock::time_point deadline, Start&& start) {
      std::error_code result = asio::error::would_block;
      start([&](std::error_code ec, auto&&...) { result = ec; });
      io.restart();
      io.run_until(deadline);
      if (result == asio::error::would_block) {
        std::error_code ignored;
        socket.close(ignored);
        io.run();
        return asio::error::timed_out;
      }
      return result;
    }
    std::error_code write(const Bytes& frame, Clock::time_point deadline) {
      return run(deadline, [&](auto handler) { asio::async_write(socket, asio::buffer(frame), handler); });
    }
    std::error_code read(asio::mutable_buffer buffer, Clock::time_point deadline) {
      return run(deadline, [&](auto handler) { asio::async_read(socket, buffer, handler); });
    }
  };

  // On the last words' connection; when it fails the server has already had the words said.
  Bytes exchange_last_words(const Bytes& frame, const char* op) {
    try {
      return exchange(*last_words_connection_, frame, op, timeout_, {});
    } catch (const Error&) {
      last_words_connection_.reset();
      last_words_.clear();
      throw;
    }
  }

  // One request and its reply on `connection`; a failure drops the connection (the caller must
  // not reuse it) and throws.
  Bytes exchange(Connection& connection, const Bytes& frame, const char* op, std::chrono::milliseconds server_timeout,
                 const std::vector<std::string>& keys) {
    auto deadline = Clock::now() + server_timeout + kServerGrace;
    std::error_code ec = connection.write(frame, deadline);
    std::array<std::uint8_t, kLengthBytes> length{};
    if (!ec) ec = connection.read(asio::buffer(length), deadline);
    Bytes body;
    if (!ec) {
      std::uint32_t size = decode_length(length.data());
      if (size == 0 || size > kMaxFrameBytes) {
        throw IoError("store server at " + where() + " sent a malformed reply (frame of " + std::to_string(size) +
                          " bytes); is that port really a libcomm store?",
                      ErrorContext{.op = op});
      }
      body.resize(size);
      ec = connection.read(asio::buffer(body), deadline);
    }
    if (ec) fail(ec, op, keys);
    return body;
  }

  std::unique_ptr<Connection> acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        auto connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
      }
    }
    return connect();
  }

  void release(std::unique_ptr<Connection> connection) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(connection));
  }

  // Connects and says hello, retrying while the server is not up yet (rank 0 may start last).
  std::unique_ptr<Connection> connect() {
    auto deadline = Clock::now() + timeout_;
    auto pause = std::chrono::milliseconds(10);
    std::string last_error;
    while (true) {
      auto connection = std::make_unique<Connection>();
      std::error_code ec;
      tcp::resolver resolver(connection->io);
      auto endpoints = resolver.resolve(host_, std::to_string(port_), ec);
      if (ec) {
        throw IoError(
            "cannot resolve store host '" + host_ + "': " + ec.message() + "; check MASTER_ADDR or the init_method URL",
            ErrorContext{.op = "store.connect"});
      }
      ec =
          connection->run(deadline, [&](auto handler) { asio::async_connect(connection->socket, endpoints, handler); });
      if (!ec && !set_close_on_exec(connection->socket.native_handle())) {
        ec = std::error_code(errno, std::generic_category());
      }
      if (!ec) {
        connection->socket.set_option(tcp::no_delay(true), ec);
        // A libcomm store answers at once; a program that accepts and says nothing (something
        // else on MASTER_PORT) is named after a few seconds, not after the whole timeout.
        auto answer_by = std::min(deadline, Clock::now() + tcp_store_protocol::kHelloDeadline);
        ec = handshake(*connection, answer_by);
        if (ec == asio::error::timed_out && Clock::now() < deadline) {
          throw IoError("the program at " + where() +
                            " accepted the connection but did not answer the store "
                            "handshake within " +
                            std::to_string(tcp_store_protocol::kHelloDeadline.count()) +
                            " s: is MASTER_PORT held by another program? Pick another port (or let commrun choose one)",
                        ErrorContext{.op = "store.connect"});
        }
        if (!ec) {
          reached_.store(true);
          return connection;
        }
      }
      last_error = ec.message();
      // Waiting for a server that has not started yet is right; waiting for one that was
      // here and now refuses connections is not: its process is gone.
      if (reached_.load() && ec == asio::error::connection_refused) {
        throw IoError("the store server at " + where() +
                          " is gone (it refuses connections now); the process hosting it (rank 0, commrun or "
                          "comm-store) has probably exited or crashed: check its output",
                      ErrorContext{.op = "store.connect"});
      }
      if (Clock::now() + pause >= deadline) break;
      log::get(log::Subsystem::Rendezvous).debug("store at {} not reachable yet ({}); retrying", where(), last_error);
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
    throw TimeoutError("could not reach the store server at " + where() + " within " + seconds_text(timeout_) +
                           " (last error: " + last_error +
                           "); start rank 0 (or commrun / comm-store) and check MASTER_ADDR and MASTER_PORT",
                       ErrorContext{.op = "store.connect"});
  }

  // Reads one reply frame of at most kMaxHelloFrameBytes (what a store sends before the
  // connection is open) into `body`.
  std::error_code read_handshake_reply(Connection& connection, Clock::time_point deadline, Bytes& body) const {
    std::array<std::uint8_t, kLengthBytes> length{};
    if (auto ec = connection.read(asio::buffer(length), deadline)) return ec;
    std::uint32_t size = decode_length(length.data());
    if (size == 0 || size > kMaxHelloFrameBytes) not_a_store();
    body.resize(size);
    return connection.read(asio::buffer(body), deadline);
  }

  [[noreturn]] void not_a_store() const {
    throw IoError("the server at " + where() +
                      " answered the store handshake with something else; "
                      "is MASTER_PORT the port of a libcomm store (of the same version)?",
                  ErrorContext{.op = "store.connect"});
  }

  // Hello, then (when the server holds a job secret) the proofs both ways. Errors of the
  // connection come back to be retried; a server that is not the job's store, or a secret
  // that does not match, is an error at once.
  std::error_code handshake(Connection& connection, Clock::time_point deadline) const {
    Nonce client_nonce = random_nonce();
    Bytes hello = FrameWriter(static_cast<std::uint8_t>(RequestType::Hello))
                      .u32(kMagic)
                      .u32(kVersion)
                      .bytes(client_nonce)
                      .finish();
    Bytes body;
    if (auto ec = connection.write(hello, deadline)) return ec;
    if (auto ec = read_handshake_reply(connection, deadline, body)) return ec;
    bool secured = false;
    Nonce server_nonce{};
    Proof server_proof{};
    try {
      FrameReader reply(body);
      auto status = static_cast<ResponseStatus>(reply.type());
      if (status == ResponseStatus::Failure) {  // a store of another libcomm version, say
        throw IoError(reply.string() + " (store at " + where() + ")", ErrorContext{.op = "store.connect"});
      }
      if (status != ResponseStatus::Ok) not_a_store();
      secured = reply.u32() != 0;
      auto nonce = reply.bytes();
      auto proof = reply.bytes();
      reply.expect_end();
      if (nonce.size() != server_nonce.size() || proof.size() != (secured ? server_proof.size() : 0)) not_a_store();
      std::copy(nonce.begin(), nonce.end(), server_nonce.begin());
      std::copy(proof.begin(), proof.end(), server_proof.begin());
    } catch (const ProtocolViolation&) {
      not_a_store();
    }
    if (!secured && !secret_) return {};
    if (!secured) {
      throw InvalidArgumentError("the store at " + where() +
                                     " runs without a job secret, but this process has one (COMM_JOB_TOKEN): "
                                     "refusing a store that any program could have started; give the store the "
                                     "same secret (commrun and rank 0 take it from COMM_JOB_TOKEN)",
                                 ErrorContext{.op = "store.connect"});
    }
    if (!secret_) {
      throw InvalidArgumentError("the store at " + where() +
                                     " admits only processes that hold the job secret, and this one has none: "
                                     "set COMM_JOB_TOKEN (or COMM_JOB_TOKEN_FILE) to the job's secret "
                                     "(commrun sets it for the ranks it starts)",
                                 ErrorContext{.op = "store.connect"});
    }
    if (!secret_->verify(server_proof, kServerProofPurpose, {server_nonce, client_nonce})) {
      throw InvalidArgumentError("the store at " + where() +
                                     " does not hold this job's secret: COMM_JOB_TOKEN differs between this "
                                     "process and the store (another job's store on this port?)",
                                 ErrorContext{.op = "store.connect"});
    }
    Proof proof = secret_->prove(kClientProofPurpose, {client_nonce, server_nonce});
    Bytes authenticate = FrameWriter(static_cast<std::uint8_t>(RequestType::Authenticate)).bytes(proof).finish();
    if (auto ec = connection.write(authenticate, deadline)) return ec;
    if (auto ec = read_handshake_reply(connection, deadline, body)) return ec;
    FrameReader reply(body);
    try {
      auto status = static_cast<ResponseStatus>(reply.type());
      if (status == ResponseStatus::Ok) return {};
      if (status == ResponseStatus::Failure) {
        throw InvalidArgumentError(reply.string() + "; store at " + where(), ErrorContext{.op = "store.connect"});
      }
    } catch (const ProtocolViolation&) {
    }
    not_a_store();
  }

  [[noreturn]] void fail(std::error_code ec, const char* op, const std::vector<std::string>& keys) const {
    std::string waiting = keys.empty() ? "" : " while waiting for " + store_format::key_list(keys);
    if (ec == asio::error::timed_out) {
      throw TimeoutError("the store server at " + where() + " did not answer" + waiting +
                             "; it may be overloaded or stopped (SIGSTOP?)",
                         ErrorContext{.op = op});
    }
    throw IoError("lost the connection to the store server at " + where() + waiting + " (" + ec.message() +
                      "); the process hosting it (rank 0, commrun or comm-store) "
                      "has probably exited or crashed: check its output",
                  ErrorContext{.op = op});
  }

  std::unique_ptr<TcpStoreServer> server_;  // first: destroyed after every connection
  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::optional<JobSecret> secret_;
  std::atomic<bool> reached_{false};  // a connection to the server succeeded once
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::mutex last_words_mutex_;  // guards the two below
  std::unique_ptr<Connection> last_words_connection_;
  std::set<std::string> last_words_;  // their keys
};

namespace {

FrameWriter request_of(RequestType type) { return FrameWriter(static_cast<std::uint8_t>(type)); }

// Reads the status byte and checks it is one the request may get back.
ResponseStatus read_status(FrameReader& reader, std::initializer_list<ResponseStatus> allowed, const std::string& where,
                           const char* op) {
  auto status = static_cast<ResponseStatus>(reader.type());
  for (auto expected : allowed) {
    if (status == expected) return status;
  }
  if (status == ResponseStatus::Failure) throw InvalidArgumentError(reader.string(), ErrorContext{.op = op});
  throw IoError("store server at " + where + " sent an unexpected reply", ErrorContext{.op = op});
}

}  // namespace

TcpStore::TcpStore(std::string host, std::uint16_t port, TcpStoreOptions options) : Store(options.timeout) {
  // Accept "[::1]" as well as "::1".
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  COMM_CHECK(!host.empty(), InvalidArgumentError, ErrorContext{.op = "TcpStore"}, "store host name is empty");
  std::optional<JobSecret> secret = resolve_job_secret(options.job_secret);
  std::unique_ptr<TcpStoreServer> server;
  if (options.is_server) {
    // Only on the address the clients were given (MASTER_ADDR=127.0.0.1: loopback only), not
    // on every interface of the host.
    server = std::make_unique<TcpStoreServer>(port, host, secret ? secret->text() : std::string());
    port = server->port();
  }
  COMM_CHECK(port != 0, InvalidArgumentError, ErrorContext{.op = "TcpStore"},
             "a TcpStore client needs the server's port; 0 only means 'any free port' for a server");
  client_ = std::make_unique<Client>(std::move(host), port, options.timeout, std::move(secret), std::move(server));
}

TcpStore::~TcpStore() = default;

std::uint16_t TcpStore::port() const { return client_->port(); }

const std::string& TcpStore::host() const { return client_->host(); }

bool TcpStore::serves_others() const { return client_->hosts_server(); }

std::string TcpStore::describe() const { return "TcpStore at " + client_->where(); }

void TcpStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  client_->call(request_of(RequestType::Set).bytes(key).bytes(value).finish(), "store.set", timeout(), {},
                [&](FrameReader& reply) { read_status(reply, {ResponseStatus::Ok}, client_->where(), "store.set"); });
}

Bytes TcpStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  Bytes frame = request_of(RequestType::Get).bytes(key).i64(timeout.count()).finish();
  return client_->call(frame, "store.get", timeout, {key}, [&](FrameReader& reply) {
    auto status = read_status(reply, {ResponseStatus::Value, ResponseStatus::Timeout}, client_->where(), "store.get");
    if (status == ResponseStatus::Timeout) throw_timeout("store.get", reply.keys(), timeout);
    auto value = reply.bytes();
    return Bytes(value.begin(), value.end());
  });
}

std::int64_t TcpStore::do_add(const std::string& key, std::int64_t delta) {
  Bytes frame = request_of(RequestType::Add).bytes(key).i64(delta).finish();
  return client_->call(frame, "store.add", timeout(), {}, [&](FrameReader& reply) {
    read_status(reply, {ResponseStatus::Integer}, client_->where(), "store.add");
    return reply.i64();
  });
}

Bytes TcpStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                               std::span<const std::uint8_t> desired) {
  Bytes frame = request_of(RequestType::CompareSet).bytes(key).bytes(expected).bytes(desired).finish();
  return client_->call(frame, "store.compare_set", timeout(), {}, [&](FrameReader& reply) {
    read_status(reply, {ResponseStatus::Value}, client_->where(), "store.compare_set");
    auto value = reply.bytes();
    return Bytes(value.begin(), value.end());
  });
}

void TcpStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Bytes frame = request_of(RequestType::Wait).keys(keys).i64(timeout.count()).finish();
  COMM_CHECK(frame.size() <= kMaxFrameBytes, InvalidArgumentError, ErrorContext{.op = "store.wait"},
             "the " + std::to_string(keys.size()) + " keys of this wait are too long together; wait in several calls");
  client_->call(frame, "store.wait", timeout, keys, [&](FrameReader& reply) {
    auto status = read_status(reply, {ResponseStatus::Ok, ResponseStatus::Timeout}, client_->where(), "store.wait");
    if (status == ResponseStatus::Timeout) throw_timeout("store.wait", reply.keys(), timeout);
  });
}

bool TcpStore::do_check(const std::vector<std::string>& keys) {
  return client_->call(request_of(RequestType::Check).keys(keys).finish(), "store.check", timeout(), {},
                       [&](FrameReader& reply) {
                         read_status(reply, {ResponseStatus::Integer}, client_->where(), "store.check");
                         return reply.i64() != 0;
                       });
}

bool TcpStore::do_delete_key(const std::string& key) {
  return client_->call(request_of(RequestType::Delete).bytes(key).finish(), "store.delete_key", timeout(), {},
                       [&](FrameReader& reply) {
                         read_status(reply, {ResponseStatus::Integer}, client_->where(), "store.delete_key");
                         return reply.i64() != 0;
                       });
}

std::int64_t TcpStore::do_num_keys() {
  return client_->call(request_of(RequestType::NumKeys).finish(), "store.num_keys", timeout(), {},
                       [&](FrameReader& reply) {
                         read_status(reply, {ResponseStatus::Integer}, client_->where(), "store.num_keys");
                         return reply.i64();
                       });
}

bool TcpStore::do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) {
  return client_->leave_last_word(key, request_of(RequestType::LastWord).bytes(key).bytes(value).finish());
}

void TcpStore::do_withdraw_last_word(const std::string& key) {
  client_->withdraw_last_word(
      key, request_of(RequestType::LastWord).bytes(key).bytes(std::span<const std::uint8_t>{}).finish());
}

}  // namespace comm
