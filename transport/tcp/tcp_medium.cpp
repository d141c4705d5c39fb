#include "transport/tcp/tcp_medium.hpp"

#include <fmt/format.h>

#include "transport/tcp/socket_stream.hpp"
#include "transport/tcp/striped_stream.hpp"

namespace comm::transport {
namespace {

class TcpSession final : public MediumSession {
 public:
  explicit TcpSession(std::string local_address) : local_address_(std::move(local_address)) {}
  std::string cannot_reach(int) const override { return {}; }
  bool reaches(int) const override { return true; }
  std::unique_ptr<ByteStream> open(int peer, const std::string& peer_name, Socket connection,
                                   std::vector<Socket> extra) override {
    set_nonblocking(connection.fd());
    if (extra.empty()) return std::make_unique<SocketStream>(std::move(connection), peer, peer_name);
    std::vector<SocketStream> connections;
    connections.emplace_back(std::move(connection), peer, peer_name);
    for (auto& socket : extra) {
      set_nonblocking(socket.fd());
      connections.emplace_back(std::move(socket), peer, peer_name);
    }
    striped_ += fmt::format("{}{} x{}", striped_.empty() ? "" : ", ", peer, connections.size());
    return std::make_unique<StripedSocketStream>(std::move(connections));
  }
  std::string description() const override { return "tcp (" + local_address_ + ")"; }
  std::string remarks() const override {
    return striped_.empty() ? std::string() : " (several connections: " + striped_ + ")";
  }

 private:
  std::string local_address_;
  std::string striped_;
};

}  // namespace

MediumEntry tcp_medium() {
  return {.name = "tcp", .automatic = true, .needs_connection = true, .open = [](const MediumJob& job) {
            return std::unique_ptr<MediumSession>(std::make_unique<TcpSession>(job.local_address));
          }};
}

}  // namespace comm::transport
