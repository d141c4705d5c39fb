// Fuzz target: the first bytes a stranger sends to a rank's data port, a mesh hello
// (transport/tcp/mesh_hello.hpp), checked as the accepting rank checks it. Never a crash, and
// never accepted without the proof (which a fuzzer cannot forge).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/tcp/mesh_hello.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const comm::transport::MeshOptions options = [] {
    comm::transport::MeshOptions made;
    made.rank = 1;
    made.size = 4;
    made.secret = comm::JobSecret("a fuzzing secret of more than 16 characters");
    return made;
  }();
  static const comm::Nonce listener_nonce = comm::random_nonce();
  comm::transport::Hello hello{};
  std::memcpy(&hello, data, size < sizeof hello ? size : sizeof hello);
  std::string reason =
      comm::transport::check_hello(hello, options, -1, listener_nonce, comm::transport::kConnectPurpose);
  if (reason.empty()) std::abort();  // accepted without knowing the secret
  (void)comm::transport::peer_name_of(hello);
  return 0;
}
