// The two halves of TcpStoreServer, private to the library: Server owns the key-value map, the
// parked requests and the acceptor; a Session is one client connection (framing, the limits on
// what a stranger may hold, the hello and the proof of the job secret). Both live on the
// server's one I/O thread, so neither needs a lock.
#pragma once

#include <asio.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "libcomm/base/warning_budget.hpp"
#include "rendezvous/tcp_store_protocol.hpp"

namespace comm {
namespace tcp_store_server {

class Session;

struct ParkedRequest {
  std::weak_ptr<Session> session;
  std::vector<std::string> keys;
  std::size_t next_key = 0;    // keys before this one were present when last looked at
  bool returns_value = false;  // a get answers with the value of keys[0]
  bool answered = false;
  std::unique_ptr<asio::steady_timer> timer;
};

class Server {
 public:
  using Clock = std::chrono::steady_clock;

  Server(std::uint16_t port, const std::string& host, std::optional<JobSecret> secret);
  ~Server();

  std::uint16_t port() const { return port_; }
  std::size_t client_count() const { return clients_.load(); }

  // Called from sessions, on the I/O thread.
  asio::io_context& io() { return io_; }
  const std::optional<JobSecret>& secret() const { return secret_; }
  // Logs why a client was dropped, at most 10 times in 10 s (a flood of bad connections must not
  // become a flood of log lines); then one line with how many were not said.
  void warn_dropped(const std::string& peer, const std::string& reason);
  Bytes execute(tcp_store_protocol::RequestType type, tcp_store_protocol::FrameReader& request,
                const std::shared_ptr<Session>& session, bool& parked);
  void session_opened() { ++clients_; }
  void session_closed() { --clients_; }
  // Why a new connection must be refused at its hello (the store is full), or empty.
  const std::string& refusal() const { return refusal_; }
  // The store's memory cap: empty when `key` may hold `value_bytes`, else the refusal.
  std::string over_memory_cap(const std::string& key, std::size_t value_bytes) const;
  // A session's client has gone: its last word goes under `key` unless the key exists.
  void say_last_word(const std::string& peer, const std::string& key, Bytes value);

 private:
  void accept();
  // Makes room for one more connection that has not proved itself: closes the oldest such one
  // when kMaxPendingClients wait already, so a flood of strangers cannot keep the job's ranks out.
  void make_room_for_pending();
  void notify_created(const std::string& key);
  void put(const std::string& key, Bytes value);
  // Registers the request under its next missing key; false when no key is missing.
  bool park(const std::shared_ptr<ParkedRequest>& request);
  void answer(const std::shared_ptr<ParkedRequest>& request);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  const Bytes* find(const std::string& key) const;

  const std::optional<JobSecret> secret_;
  // Sessions die with io_'s pending handlers and count themselves out of clients_ then, so
  // clients_ is declared before io_, which is declared before everything bound to it.
  std::atomic<std::size_t> clients_{0};
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  std::uint16_t port_ = 0;
  std::unordered_map<std::string, Bytes> values_;
  std::size_t held_bytes_ = 0;  // keys and values in values_
  std::size_t memory_cap_bytes_;
  std::deque<std::weak_ptr<Session>> pending_;  // sessions in the order they came, not yet open
  std::string refusal_;
  std::unordered_map<std::string, std::vector<std::shared_ptr<ParkedRequest>>> parked_;
  WarningBudget drop_warnings_{10, std::chrono::seconds(10)};
  std::thread thread_;
};

// One client connection. It handles one request at a time: it reads a frame, answers it (now,
// or later for a parked get/wait), and keeps reading meanwhile only to notice a client that
// hangs up.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::ip::tcp::socket socket, Server& server);
  ~Session();

  void start();
  // Queues a response frame; frames go out in order.
  void respond(Bytes frame);
  void close(const std::string& reason);
  bool is_open() const { return socket_.is_open(); }
  bool proved() const { return stage_ == Stage::Open; }
  // Answered at its hello with `reason` (the store is full), then closed.
  void refuse_at_hello(std::string reason) { refuse_reason_ = std::move(reason); }
  // Registers (non-empty value) or withdraws what the server writes when this client goes;
  // false when the client already holds kMaxLastWords.
  bool set_last_word(const std::string& key, Bytes value);

 private:
  enum class Stage { AwaitHello, AwaitProof, Open };

  void read_length();
  void read_body();
  void handle_request();
  // The hello and the proof of the secret; throws ProtocolViolation for anything else.
  void handshake(tcp_store_protocol::RequestType type, tcp_store_protocol::FrameReader& request);
  void open();
  void write_next();

  asio::ip::tcp::socket socket_;
  Server& server_;
  std::string peer_;
  std::array<std::uint8_t, tcp_store_protocol::kLengthBytes> length_{};
  std::size_t frame_bytes_ = 0;  // of the frame being read
  Bytes body_;
  asio::steady_timer hello_timer_;
  std::deque<Bytes> outbox_;
  Stage stage_ = Stage::AwaitHello;
  Nonce client_nonce_{};
  Nonce server_nonce_{};
  std::vector<std::pair<std::string, Bytes>> last_words_;
  bool busy_ = false;             // a request is being answered (possibly parked)
  bool close_when_sent_ = false;  // the last reply refused the client
  std::string refuse_reason_;
};

}  // namespace tcp_store_server
}  // namespace comm
