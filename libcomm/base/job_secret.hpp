// The job secret: what proves that a connection to a store or to a rank comes from this job.
//
// Both sides of a connection exchange fresh random nonces and each proves it holds the secret
// with an HMAC-SHA256 over the nonces (OpenSSL's libcrypto; no hand-written crypto). The secret
// itself never travels and is never put in a store, and a recorded proof is worthless on a
// connection with other nonces. commrun makes one per job; across hosts the user gives it
// (COMM_JOB_TOKEN, or the file named by COMM_JOB_TOKEN_FILE).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace comm {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// Bytes as lower-case hex: nonces, proofs and ids in stores and announcements.
std::string hex_text(std::span<const std::uint8_t> bytes);

// Nonces from the operating system's generator, through libcrypto.
Nonce random_nonce();
// A nonce as 64 hex characters (to publish in a store), and back; nothing when it is not one.
std::string nonce_text(const Nonce& nonce);
std::optional<Nonce> parse_nonce(std::string_view text);

class JobSecret {
 public:
  // At least kMinimumBytes characters: a secret short enough to guess protects nothing.
  static constexpr std::size_t kMinimumBytes = 16;
  explicit JobSecret(std::string text);

  // COMM_JOB_TOKEN, else the first line of the file COMM_JOB_TOKEN_FILE names; nothing when
  // neither is set. Throws InvalidArgumentError naming the variable for a short or unreadable one.
  static std::optional<JobSecret> from_environment();
  // 32 random bytes as 64 hex characters, for a launcher to hand to its ranks.
  static JobSecret generate();

  // The secret as given: for handing to child processes only, never for a log or a store.
  const std::string& text() const { return text_; }

  // HMAC-SHA256 keyed by the secret over the purpose and the parts (each length-prefixed, so
  // different splits of the same bytes never prove the same thing).
  Proof prove(std::string_view purpose, std::initializer_list<std::span<const std::uint8_t>> parts) const;
  // Whether `claimed` is that proof, compared in constant time.
  bool verify(const Proof& claimed, std::string_view purpose,
              std::initializer_list<std::span<const std::uint8_t>> parts) const;

  // A public name of the job derived from the secret (16 hex characters): names its
  // shared-memory segments without saying anything about the secret.
  std::string job_id() const;

 private:
  std::string text_;
};

// The secret an API option names: unset means from the environment (as above), "" means none.
std::optional<JobSecret> resolve_job_secret(const std::optional<std::string>& given);

}  // namespace comm
