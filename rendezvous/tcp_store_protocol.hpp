// The TcpStore wire format, shared by server and client.
//
// Every message is a frame: [u32 body bytes][body], little-endian. A request body is
// [u8 RequestType][fields]; a response body is [u8 ResponseStatus][fields]. Fields are u32,
// i64 or byte strings ([u32 length][bytes]). A connection opens with Hello; when the server
// holds a job secret the client must then Authenticate before anything else. Anything else
// first, an unknown type, a field running past the frame, or a frame over its limit makes the
// server close that connection.
//
//   Hello        u32 magic, u32 version, client nonce     -> Ok u32 secured, server nonce,
//                                                             server proof (empty when not secured)
//   Authenticate client proof                             -> Ok | Failure(message), then closed
//   Set          key, value                                -> Ok
//   Get          key, i64 timeout ms                       -> Value | Timeout(missing keys)
//   Add          key, i64 delta                            -> Integer | Failure(message)
//   CompareSet   key, expected, desired                    -> Value
//   Wait         u32 n, n keys, i64 timeout ms             -> Ok | Timeout(missing keys)
//   Check        u32 n, n keys                             -> Integer (1: all present)
//   Delete       key                                       -> Integer (1: existed)
//   NumKeys                                                -> Integer
//   LastWord     key, value                                -> Ok | Failure(message)
//
// LastWord registers what the server writes under key (unless it exists) when this connection
// ends, whatever the reason; an empty value withdraws the word for that key. A server shutting
// down says no last words. A connection holds at most kMaxLastWords.
//
// The proofs (see libcomm/base/job_secret.hpp) are HMACs of both nonces under different
// purposes: the server's shows the client it reached the job's store, the client's shows the
// server it holds the secret; fresh nonces on both sides make a recorded exchange worthless.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/store.hpp"

namespace comm::tcp_store_protocol {

inline constexpr std::uint32_t kMagic = 0x4D4D4F43;  // "COMM"
inline constexpr std::uint32_t kVersion = 3;         // 3: LastWord
inline constexpr std::size_t kLengthBytes = 4;
// A compare_set of two maximal values is the largest legal request.
inline constexpr std::size_t kMaxFrameBytes = 2 * kMaxStoreValueBytes + 64 * 1024;
// Until it has authenticated (or said hello to a store without a secret) a connection may send
// no more than this in a frame, and no longer than kHelloDeadline: a stranger holds a few KiB
// for a few seconds, whatever it announces.
inline constexpr std::size_t kMaxHelloFrameBytes = 4096;
inline constexpr std::chrono::seconds kHelloDeadline{5};
inline constexpr std::size_t kMaxLastWords = 16;

enum class RequestType : std::uint8_t {
  Hello = 1,
  Set,
  Get,
  Add,
  CompareSet,
  Wait,
  Check,
  Delete,
  NumKeys,
  Authenticate,
  LastWord
};

// What a proof covers, so that a server's proof can never pass for a client's.
inline constexpr const char* kServerProofPurpose = "libcomm store server";
inline constexpr const char* kClientProofPurpose = "libcomm store client";
enum class ResponseStatus : std::uint8_t { Ok = 0, Value, Integer, Timeout, Failure };

// Builds one frame; the length prefix is filled in by finish().
class FrameWriter {
 public:
  explicit FrameWriter(std::uint8_t type);
  FrameWriter& u32(std::uint32_t value);
  FrameWriter& i64(std::int64_t value);
  FrameWriter& bytes(std::span<const std::uint8_t> value);
  FrameWriter& bytes(const std::string& value);
  FrameWriter& keys(const std::vector<std::string>& keys);
  Bytes finish();  // the frame; the writer is spent afterwards

 private:
  Bytes frame_;
};

// Reads fields from a frame body; throws ProtocolViolation when a field runs past the end.
struct ProtocolViolation {
  std::string reason;
};

class FrameReader {
 public:
  explicit FrameReader(std::span<const std::uint8_t> body) : body_(body) {}
  std::uint8_t type();
  std::uint32_t u32();
  std::int64_t i64();
  std::span<const std::uint8_t> bytes();
  std::string string();
  std::vector<std::string> keys();
  void expect_end() const;

 private:
  std::span<const std::uint8_t> take(std::size_t count);
  std::span<const std::uint8_t> body_;
  std::size_t at_ = 0;
};

std::uint32_t decode_length(const std::uint8_t* prefix);

}  // namespace comm::tcp_store_protocol
