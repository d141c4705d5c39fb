// Key-value stores that bootstrap ranks: they exchange addresses, host identities and tokens
// before any connection between ranks exists, as torch.distributed's stores do.
//
//   TcpStore     a client of a TcpStoreServer (hosted by rank 0, by commrun, or by comm-store)
//   FileStore    a file on a file system every rank sees (fcntl-locked, append-only log)
//   HashStore    in one process (ranks as threads)
//   PrefixStore  a namespace inside another store (per group, per job)
//
// Each keeps the Store interface of comm/store_interface.hpp (thread-safe; blocking calls end at
// the store's timeout with a TimeoutError that names the keys still missing).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/store_interface.hpp"

namespace comm {

// In-process store: ranks as threads of one process.
class HashStore final : public Store {
 public:
  explicit HashStore(std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~HashStore() override;
  std::string describe() const override { return "HashStore"; }

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;

 private:
  void wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const char* op);
  struct State;
  std::unique_ptr<State> state_;
};

// Every key is stored as prefix + "/" + key in the underlying store. num_keys() counts the
// whole underlying store, as in torch.distributed.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);
  std::string describe() const override;
  ~PrefixStore() override;
  const std::shared_ptr<Store>& underlying() const;
  bool serves_others() const override;

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;
  bool do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) override;
  void do_withdraw_last_word(const std::string& key) override;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

// A store in a file that every rank can open (a local or shared file system). The file is an
// append-only log guarded by fcntl locks; it is removed when the last FileStore using it is
// destroyed. Waiting re-reads the file with a short back-off (at most 10 ms between looks).
class FileStore final : public Store {
 public:
  explicit FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;
  std::string describe() const override;

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;

 private:
  void wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const char* op);
  class Log;
  std::unique_ptr<Log> log_;
};

struct TcpStoreOptions {
  // Host a TcpStoreServer in this process on the given port (0: any free port, see port()).
  bool is_server = false;
  // Bounds every blocking call, and how long a client keeps retrying to reach the server.
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  // The job secret: a client proves it holds it before any request, and checks that the server
  // holds it too; a server (is_server) demands it of every client. The secret itself never
  // travels. Unset: COMM_JOB_TOKEN, or the first line of the file COMM_JOB_TOKEN_FILE names;
  // neither set, or "": none, and any program that reaches the port may use the store.
  std::optional<std::string> job_secret{};
};

class TcpStoreServer;
namespace tcp_store_server {
class Server;  // the library's side of a TcpStoreServer
}  // namespace tcp_store_server

// A client of a TcpStoreServer at host:port (IPv4, IPv6 or a host name). The constructor
// retries until the server answers or the timeout passes. Calls from several threads use
// separate connections, so a thread blocked in get() never delays another thread's set().
class TcpStore final : public Store {
 public:
  TcpStore(std::string host, std::uint16_t port, TcpStoreOptions options = {});
  ~TcpStore() override;
  std::string describe() const override;
  std::uint16_t port() const;
  const std::string& host() const;
  bool serves_others() const override;

 protected:
  void do_set(const std::string& key, std::span<const std::uint8_t> value) override;
  Bytes do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t do_add(const std::string& key, std::int64_t delta) override;
  Bytes do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                       std::span<const std::uint8_t> desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  std::int64_t do_num_keys() override;
  bool do_leave_last_word(const std::string& key, std::span<const std::uint8_t> value) override;
  void do_withdraw_last_word(const std::string& key) override;

 private:
  class Client;  // holds the server too, when this process hosts it
  std::unique_ptr<Client> client_;
};

// The server behind TcpStore: one I/O thread serving any number of clients. Blocking requests
// are parked on the server and answered when their keys appear or their timeout passes.
// Malformed input closes that client's connection and is logged; the server goes on.
class TcpStoreServer {
 public:
  // Binds host:port ("" or "0.0.0.0" or "::": every interface). Port 0 picks a free port.
  // Throws IoError when the port is in use. job_secret as in TcpStoreOptions.
  explicit TcpStoreServer(std::uint16_t port, std::string host = "",
                          std::optional<std::string> job_secret = std::nullopt);
  ~TcpStoreServer();  // stops the thread and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const;
  std::size_t client_count() const;

 private:
  std::unique_ptr<tcp_store_server::Server> server_;
};

}  // namespace comm
