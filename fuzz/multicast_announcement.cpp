// Fuzz target: a stranger's datagram on a discovery group (rendezvous/multicast_announcement.hpp).
// Whatever the bytes, parsing returns or refuses; what it accepts writes back as the same text,
// and its proof is checked under a secret without fault.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "libcomm/base/job_secret.hpp"
#include "rendezvous/multicast_announcement.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const comm::JobSecret secret("a fuzzing secret of more than 16 characters");
  std::string datagram(reinterpret_cast<const char*>(data), size);
  auto parsed = comm::parse_announcement(datagram);
  if (!parsed) return 0;
  if (comm::announcement_text(parsed->announcement) != parsed->signed_part) std::abort();
  if (auto proof = comm::parse_nonce(parsed->proof)) {
    const std::string& text = parsed->signed_part;
    (void)secret.verify(*proof, "libcomm multicast announcement",
                        {std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size())});
  }
  return 0;
}
