#include "libcomm/base/job_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <vector>

#include "libcomm/base/check.hpp"
#include "libcomm/base/environment.hpp"

namespace comm {
namespace {

// OpenSSL frees its global state from an atexit handler by default; a store server's thread still
// answering a hello while the process exits then used freed locks in RAND_bytes and crashed (found
// by fuzz/store_server at its exit). Initialized without that handler, the state lives as long as
// the process. Called before every use: cheap after the first.
void initialize_crypto() {
  static const bool initialized = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  (void)initialized;
}

void random_bytes(std::span<std::uint8_t> out) {
  initialize_crypto();
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    throw IoError("the system's random generator failed (RAND_bytes); cannot make a nonce or a job secret",
                  ErrorContext{.op = "job_secret"});
  }
}

void append_part(std::vector<std::uint8_t>& message, std::span<const std::uint8_t> part) {
  auto size = static_cast<std::uint32_t>(part.size());
  for (int shift = 0; shift < 32; shift += 8) message.push_back(static_cast<std::uint8_t>(size >> shift));
  message.insert(message.end(), part.begin(), part.end());
}

}  // namespace

std::string hex_text(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::uint8_t byte : bytes) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

Nonce random_nonce() {
  Nonce nonce;
  random_bytes(nonce);
  return nonce;
}

std::string nonce_text(const Nonce& nonce) { return hex_text(nonce); }

std::optional<Nonce> parse_nonce(std::string_view text) {
  Nonce nonce{};
  if (text.size() != 2 * nonce.size()) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < nonce.size(); ++i) {
    int high = digit(text[2 * i]), low = digit(text[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    nonce[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return nonce;
}

JobSecret::JobSecret(std::string text) : text_(std::move(text)) {
  COMM_CHECK(text_.size() >= kMinimumBytes, InvalidArgumentError, ErrorContext{.op = "job_secret"},
             "a job secret of " + std::to_string(text_.size()) + " characters is too short to protect anything; give " +
                 std::to_string(kMinimumBytes) + " or more (for example: openssl rand -hex 32)");
}

std::optional<JobSecret> JobSecret::from_environment() {
  if (auto text = environment::get("COMM_JOB_TOKEN")) {
    if (text->size() < kMinimumBytes) {
      throw InvalidArgumentError("COMM_JOB_TOKEN has " + std::to_string(text->size()) +
                                     " characters; a job secret needs " + std::to_string(kMinimumBytes) +
                                     " or more (for example: openssl rand -hex 32)",
                                 ErrorContext{.op = "job_secret"});
    }
    return JobSecret(*text);
  }
  auto path = environment::get("COMM_JOB_TOKEN_FILE");
  if (!path) return std::nullopt;
  std::ifstream file(*path);
  std::string line;
  if (!file || !std::getline(file, line) || line.size() < kMinimumBytes) {
    throw InvalidArgumentError(
        "COMM_JOB_TOKEN_FILE names '" + *path + "', which " +
            (file ? "does not start with a line of " + std::to_string(kMinimumBytes) + " or more characters"
                  : std::string("cannot be read")) +
            "; put the job secret on its first line (for example: openssl rand -hex 32 > FILE)",
        ErrorContext{.op = "job_secret"});
  }
  return JobSecret(line);
}

JobSecret JobSecret::generate() {
  std::array<std::uint8_t, 32> bytes;
  random_bytes(bytes);
  return JobSecret(hex_text(bytes));
}

Proof JobSecret::prove(std::string_view purpose, std::initializer_list<std::span<const std::uint8_t>> parts) const {
  std::vector<std::uint8_t> message;
  append_part(message, {reinterpret_cast<const std::uint8_t*>(purpose.data()), purpose.size()});
  for (auto part : parts) append_part(message, part);
  Proof proof{};
  unsigned int length = 0;
  initialize_crypto();
  if (HMAC(EVP_sha256(), text_.data(), static_cast<int>(text_.size()), message.data(), message.size(), proof.data(),
           &length) == nullptr ||
      length != proof.size()) {
    throw IoError("HMAC-SHA256 failed in libcrypto", ErrorContext{.op = "job_secret"});
  }
  return proof;
}

bool JobSecret::verify(const Proof& claimed, std::string_view purpose,
                       std::initializer_list<std::span<const std::uint8_t>> parts) const {
  Proof expected = prove(purpose, parts);
  return CRYPTO_memcmp(expected.data(), claimed.data(), expected.size()) == 0;
}

std::optional<JobSecret> resolve_job_secret(const std::optional<std::string>& given) {
  if (!given) return JobSecret::from_environment();
  if (given->empty()) return std::nullopt;
  return JobSecret(*given);
}

std::string JobSecret::job_id() const {
  Proof digest = prove("libcomm job id", {});
  return hex_text(std::span(digest).first(8));
}

}  // namespace comm
