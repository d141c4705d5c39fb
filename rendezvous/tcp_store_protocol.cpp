#include "rendezvous/tcp_store_protocol.hpp"

#include <cstring>

namespace comm::tcp_store_protocol {

FrameWriter::FrameWriter(std::uint8_t type) {
  frame_.reserve(64);
  frame_.resize(kLengthBytes);
  frame_.push_back(type);
}

FrameWriter& FrameWriter::u32(std::uint32_t value) {
  for (int i = 0; i < 4; ++i) frame_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  return *this;
}

FrameWriter& FrameWriter::i64(std::int64_t value) {
  auto bits = static_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) frame_.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
  return *this;
}

FrameWriter& FrameWriter::bytes(std::span<const std::uint8_t> value) {
  u32(static_cast<std::uint32_t>(value.size()));
  frame_.insert(frame_.end(), value.begin(), value.end());
  return *this;
}

FrameWriter& FrameWriter::bytes(const std::string& value) {
  return bytes({reinterpret_cast<const std::uint8_t*>(value.data()), value.size()});
}

FrameWriter& FrameWriter::keys(const std::vector<std::string>& keys) {
  u32(static_cast<std::uint32_t>(keys.size()));
  for (const auto& key : keys) bytes(key);
  return *this;
}

Bytes FrameWriter::finish() {
  auto body = static_cast<std::uint32_t>(frame_.size() - kLengthBytes);
  for (int i = 0; i < 4; ++i) frame_[i] = static_cast<std::uint8_t>(body >> (8 * i));
  return std::move(frame_);
}

std::uint32_t decode_length(const std::uint8_t* prefix) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{prefix[i]} << (8 * i);
  return value;
}

std::span<const std::uint8_t> FrameReader::take(std::size_t count) {
  if (body_.size() - at_ < count) {
    throw ProtocolViolation{"field of " + std::to_string(count) + " bytes runs past the end of a " +
                            std::to_string(body_.size()) + "-byte frame"};
  }
  auto field = body_.subspan(at_, count);
  at_ += count;
  return field;
}

std::uint8_t FrameReader::type() { return take(1)[0]; }

std::uint32_t FrameReader::u32() { return decode_length(take(4).data()); }

std::int64_t FrameReader::i64() {
  auto field = take(8);
  std::uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits |= std::uint64_t{field[i]} << (8 * i);
  return static_cast<std::int64_t>(bits);
}

std::span<const std::uint8_t> FrameReader::bytes() { return take(u32()); }

std::string FrameReader::string() {
  auto field = bytes();
  return {reinterpret_cast<const char*>(field.data()), field.size()};
}

std::vector<std::string> FrameReader::keys() {
  std::uint32_t count = u32();
  // Each key needs at least its 4-byte length, which bounds the count by the frame size.
  if (count > (body_.size() - at_) / 4 || count > kMaxStoreKeysPerCall) {
    throw ProtocolViolation{"key count " + std::to_string(count) + " does not fit the frame"};
  }
  std::vector<std::string> result;
  result.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    result.push_back(string());
    if (result.back().empty() || result.back().size() > kMaxStoreKeyBytes) {
      throw ProtocolViolation{"key of " + std::to_string(result.back().size()) + " bytes"};
    }
  }
  return result;
}

void FrameReader::expect_end() const {
  if (at_ != body_.size()) {
    throw ProtocolViolation{std::to_string(body_.size() - at_) + " stray bytes after the fields"};
  }
}

}  // namespace comm::tcp_store_protocol
