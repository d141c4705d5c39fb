#include "transport/tcp/mesh_hello.hpp"

#include <cstddef>
#include <cstring>

#include "transport/tcp/socket_tuning.hpp"

namespace comm::transport {
namespace {

constexpr std::uint32_t kMagic = 0x50435443;  // "CTCP"
constexpr std::uint32_t kVersion = 3;

std::span<const std::uint8_t> proved_bytes(const Hello& hello) {
  return {reinterpret_cast<const std::uint8_t*>(&hello), offsetof(Hello, proof)};
}

}  // namespace

Hello make_hello(const MeshOptions& options, int to_rank, int stream_index, int stream_count, const Nonce& their_nonce,
                 const char* purpose) {
  Hello hello{};
  hello.magic = kMagic;
  hello.version = kVersion;
  hello.from_rank = options.rank;
  hello.to_rank = to_rank;
  hello.world_size = options.size;
  hello.stream_index = stream_index;
  hello.stream_count = stream_count;
  Nonce nonce = random_nonce();
  std::memcpy(hello.nonce, nonce.data(), nonce.size());
  std::strncpy(hello.name, process_name(options.rank).c_str(), sizeof hello.name - 1);
  Proof proof = options.secret->prove(purpose, {their_nonce, proved_bytes(hello)});
  std::memcpy(hello.proof, proof.data(), proof.size());
  return hello;
}

Nonce nonce_of(const Hello& hello) {
  Nonce nonce;
  std::memcpy(nonce.data(), hello.nonce, nonce.size());
  return nonce;
}

std::string check_hello(const Hello& hello, const MeshOptions& options, int expected_from, const Nonce& my_nonce,
                        const char* purpose) {
  if (hello.magic != kMagic) return "not a libcomm connection (bad magic)";
  if (hello.version != kVersion)
    return "protocol version " + std::to_string(hello.version) + ", expected " + std::to_string(kVersion);
  if (hello.world_size != options.size || hello.to_rank != options.rank) {
    return "it belongs to another group (world size " + std::to_string(hello.world_size) + ", rank " +
           std::to_string(hello.to_rank) + ")";
  }
  if (hello.from_rank < 0 || hello.from_rank >= options.size ||
      (expected_from >= 0 && hello.from_rank != expected_from)) {
    return "unexpected peer rank " + std::to_string(hello.from_rank);
  }
  if (hello.stream_count < 1 || hello.stream_count > kMaxSocketStreams || hello.stream_index < 0 ||
      hello.stream_index >= hello.stream_count) {
    return "connection " + std::to_string(hello.stream_index) + " of " + std::to_string(hello.stream_count) +
           " is not a valid place";
  }
  Proof proof;
  std::memcpy(proof.data(), hello.proof, proof.size());
  if (!options.secret->verify(proof, purpose, {my_nonce, proved_bytes(hello)})) {
    return "no valid proof of the job secret (a stranger, a replayed handshake, or a rank with another "
           "COMM_JOB_TOKEN)";
  }
  return "";
}

std::string peer_name_of(const Hello& hello) { return std::string(hello.name, strnlen(hello.name, sizeof hello.name)); }

}  // namespace comm::transport
