// The TcpStore wire format, shared by server and client.
//
// Every message is a frame: [u32 body bytes][body], little-endian. A request body is
// [u8 RequestType][fields]; a response body is [u8 ResponseStatus][fields]. Fields are u32,
// i64 or byte strings ([u32 length][bytes]). A connection opens with Hello (magic and
// version); anything else first, an unknown type, a field running past the frame, or a frame
// over kMaxFrameBytes makes the server close that connection.
//
//   Hello      u32 magic, u32 version                      -> Ok
//   Set        key, value                                  -> Ok
//   Get        key, i64 timeout ms                         -> Value | Timeout(missing keys)
//   Add        key, i64 delta                              -> Integer | Failure(message)
//   CompareSet key, expected, desired                      -> Value
//   Wait       u32 n, n keys, i64 timeout ms               -> Ok | Timeout(missing keys)
//   Check      u32 n, n keys                               -> Integer (1: all present)
//   Delete     key                                         -> Integer (1: existed)
//   NumKeys                                                -> Integer
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/store.hpp"

namespace comm::tcp_store_protocol {

inline constexpr std::uint32_t kMagic = 0x4D4D4F43;  // "COMM"
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kLengthBytes = 4;
// A compare_set of two maximal values is the largest legal request.
inline constexpr std::size_t kMaxFrameBytes = 2 * kMaxStoreValueBytes + 64 * 1024;
// Before its hello a connection may send no more than this in a frame, and no longer than
// kHelloDeadline: a stranger holds a few KiB for a few seconds, whatever it announces.
inline constexpr std::size_t kMaxHelloFrameBytes = 4096;
inline constexpr std::chrono::seconds kHelloDeadline{5};

enum class RequestType : std::uint8_t { Hello = 1, Set, Get, Add, CompareSet, Wait, Check, Delete, NumKeys };
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
