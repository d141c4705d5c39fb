// The mesh handshake's message: what a rank connecting to another says first (and what the
// accepting rank answers), proved with the job secret over the other side's fresh nonce. Apart
// from the connection code so that the check of a stranger's bytes can be fuzzed on its own
// (fuzz/mesh_hello.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "libcomm/base/job_secret.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace comm::transport {

inline constexpr const char* kConnectPurpose = "libcomm mesh connect";
inline constexpr const char* kAcceptPurpose = "libcomm mesh accept";
// A lower rank asking a higher one to connect to it (connections made on first use).
inline constexpr const char* kRequestPurpose = "libcomm mesh request";

// Sent as it is, in the hosts' byte order (ranks of one job run one build).
struct Hello {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t from_rank;
  std::int32_t to_rank;
  std::int32_t world_size;
  std::int32_t stream_index;  // which of the pair's connections this is,
  std::int32_t stream_count;  // of how many
  std::uint8_t nonce[kNonceBytes];
  char name[160];
  std::uint8_t proof[kProofBytes];  // over everything above and the other side's nonce
};

// A connector's hello answers the listener's nonce; an acceptor's answer the connector's.
Hello make_hello(const MeshOptions& options, int to_rank, int stream_index, int stream_count, const Nonce& their_nonce,
                 const char* purpose);

// Why a hello is not from the peer we expect (expected_from -1: any rank), or "" when it is.
std::string check_hello(const Hello& hello, const MeshOptions& options, int expected_from, const Nonce& my_nonce,
                        const char* purpose);

Nonce nonce_of(const Hello& hello);
std::string peer_name_of(const Hello& hello);

}  // namespace comm::transport
