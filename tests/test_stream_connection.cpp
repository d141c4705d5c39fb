// StreamConnection's receiving side against a scripted stream: a payload combined into its
// target as it arrives (reduce on arrival) must equal target op payload element by element,
// whether the bytes come through the staging inbox, through the stream's own memory, or through
// a copy the stream makes first; misaligned in memory, and cut mid-element between reads. And
// small messages handed over whole when their payload came with the header, in order either way.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/reduce.hpp"
#include "transport/message/stream_connection.hpp"

using comm::DType;
using comm::ReduceOp;
using comm::transport::ByteStream;
using comm::transport::Combiner;
using comm::transport::FrameHeader;
using comm::transport::FrameKind;
using comm::transport::StreamConnection;

namespace {

// Serves prepared bytes in runs of the given lengths (cycled), from memory at a chosen offset.
class ScriptedStream final : public ByteStream {
 public:
  ScriptedStream(const std::vector<std::uint8_t>& bytes, std::size_t misalign, std::vector<std::size_t> runs,
                 bool in_place)
      : memory_(bytes.size() + misalign), begin_(misalign), runs_(std::move(runs)), in_place_(in_place) {
    std::memcpy(memory_.data() + misalign, bytes.data(), bytes.size());
  }
  std::size_t write_some(const iovec*, int) override { return 0; }
  std::size_t read_some(void* data, std::size_t bytes) override {
    std::size_t n = next(bytes);
    std::memcpy(data, memory_.data() + begin_ + position_, n);
    position_ += n;
    return n;
  }
  bool reads_in_place() const override { return in_place_; }
  std::size_t read_through(std::size_t bytes, RunSink& sink) override {
    if (!in_place_) return ByteStream::read_through(bytes, sink);
    std::size_t n = next(bytes);
    if (n > 0) sink(memory_.data() + begin_ + position_, n);
    position_ += n;
    return n;
  }
  int wakeup_fd() const override { return -1; }
  bool prepare_to_sleep(bool) override { return true; }
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "scripted"; }

 private:
  std::size_t next(std::size_t wanted) {
    std::size_t left = memory_.size() - begin_ - position_;
    std::size_t run = runs_[turn_++ % runs_.size()];
    return std::min({wanted, left, run});
  }
  std::vector<std::uint8_t> memory_;
  std::size_t begin_, position_ = 0, turn_ = 0;
  std::vector<std::size_t> runs_;
  bool in_place_;
};

void add_float64(void* target, const void* incoming, std::size_t count, DType dtype, ReduceOp op) {
  comm::algorithms::reduce(target, incoming, count, dtype, op);
}

class CombiningSink final : public StreamConnection::Sink {
 public:
  CombiningSink(std::uint8_t* target, Combiner reduction) : target_(target), reduction_(reduction) {}
  StreamConnection::PayloadTarget on_header(StreamConnection&, const FrameHeader&) override {
    return {target_, &reduction_};
  }
  bool on_payload(StreamConnection&, const FrameHeader& header) override {
    completed_bytes = header.bytes;
    return true;
  }
  std::size_t completed_bytes = 0;

 private:
  std::uint8_t* target_;
  Combiner reduction_;
};

}  // namespace

TEST_CASE("a payload combined on arrival equals target + payload, however its bytes come", "[transport]") {
  bool in_place = GENERATE(true, false);
  std::size_t misalign = GENERATE(0, 1, 3, 4);
  auto runs = GENERATE(std::vector<std::size_t>{1 << 30}, std::vector<std::size_t>{5, 13, 40001, 7, 3},
                       std::vector<std::size_t>{70001, 9});
  const std::size_t count = 50'000;  // 400 KB: the first part through the inbox, the rest read through
  INFO("in place " << in_place << ", misaligned by " << misalign << ", first run " << runs.front());

  std::vector<double> payload(count), target(count), expected(count);
  for (std::size_t i = 0; i < count; ++i) {
    payload[i] = static_cast<double>(i % 1000) - 500.0;
    target[i] = static_cast<double>(i % 77) * 0.5;
    expected[i] = target[i] + payload[i];
  }
  FrameHeader header{};
  header.kind = FrameKind::Eager;
  header.tag = 9;
  header.bytes = count * sizeof(double);
  std::vector<std::uint8_t> bytes(sizeof header + header.bytes);
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + sizeof header, payload.data(), header.bytes);

  StreamConnection connection(1, "peer", std::make_unique<ScriptedStream>(bytes, misalign, runs, in_place));
  CombiningSink sink(reinterpret_cast<std::uint8_t*>(target.data()),
                     Combiner{&add_float64, DType::Float64, ReduceOp::Sum, sizeof(double)});
  for (int polls = 0; polls < 100'000 && sink.completed_bytes == 0; ++polls) connection.receive(sink);
  REQUIRE(sink.completed_bytes == header.bytes);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += target[i] != expected[i];
  CHECK(wrong == 0);
}

namespace {

// Records every eager message, whichever way it comes: whole (on_message, payload at hand) or
// header first and payload after (on_header, on_payload). Counts the ways.
class RecordingSink final : public StreamConnection::Sink {
 public:
  Handled on_message(StreamConnection&, const FrameHeader& header, const std::uint8_t* payload) override {
    ++whole;
    messages.emplace_back(header.tag, std::vector<std::uint8_t>(payload, payload + header.bytes));
    return header.tag == completes_on ? Handled::Completed : Handled::Delivered;
  }
  StreamConnection::PayloadTarget on_header(StreamConnection&, const FrameHeader& header) override {
    ++in_two_steps;
    messages.emplace_back(header.tag, std::vector<std::uint8_t>(header.bytes));
    return {messages.back().second.data()};
  }
  bool on_payload(StreamConnection&, const FrameHeader& header) override { return header.tag == completes_on; }
  std::vector<std::pair<std::uint64_t, std::vector<std::uint8_t>>> messages;
  int whole = 0, in_two_steps = 0;
  std::uint64_t completes_on = ~std::uint64_t{0};
};

}  // namespace

TEST_CASE("small messages come whole when their payload arrived with the header, else in two steps, in order",
          "[transport]") {
  auto runs = GENERATE(std::vector<std::size_t>{1 << 30}, std::vector<std::size_t>{41, 7, 3000, 1},
                       std::vector<std::size_t>{1});
  // Lengths around the whole-message bound, odd ones that leave later headers unaligned, and 0.
  const std::vector<std::size_t> lengths = {8, 0, 3, StreamConnection::kWholeMessageBytes,
                                            StreamConnection::kWholeMessageBytes + 1, 5000, 17, 8};
  std::vector<std::uint8_t> bytes;
  std::vector<std::vector<std::uint8_t>> sent;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    FrameHeader header{};
    header.kind = FrameKind::Eager;
    header.tag = 100 + i;
    header.bytes = lengths[i];
    std::vector<std::uint8_t> payload(lengths[i]);
    for (std::size_t b = 0; b < payload.size(); ++b) payload[b] = static_cast<std::uint8_t>(i * 31 + b * 7);
    const auto* raw = reinterpret_cast<const std::uint8_t*>(&header);
    bytes.insert(bytes.end(), raw, raw + sizeof header);
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    sent.push_back(std::move(payload));
  }
  StreamConnection connection(1, "peer", std::make_unique<ScriptedStream>(bytes, 0, runs, false));
  RecordingSink sink;
  for (int polls = 0; polls < 100'000 && sink.messages.size() < lengths.size(); ++polls) connection.receive(sink);
  REQUIRE(sink.messages.size() == lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    INFO("message " << i);
    CHECK(sink.messages[i].first == 100 + i);
    CHECK(sink.messages[i].second == sent[i]);
  }
  // Larger than the bound: never whole. Read all at once: every one within it is.
  CHECK(sink.in_two_steps >= 2);
  if (runs.front() == (1 << 30)) CHECK(sink.whole == static_cast<int>(lengths.size()) - 2);
  if (runs.front() == 1) CHECK(sink.whole == 1);  // the empty one: its header is all of it
}

TEST_CASE("a whole message that completes what the caller waits for ends the read there", "[transport]") {
  std::vector<std::uint8_t> bytes;
  for (std::uint64_t tag : {1, 2, 3}) {
    FrameHeader header{};
    header.kind = FrameKind::Eager;
    header.tag = tag;
    header.bytes = 8;
    const auto* raw = reinterpret_cast<const std::uint8_t*>(&header);
    bytes.insert(bytes.end(), raw, raw + sizeof header);
    bytes.insert(bytes.end(), 8, static_cast<std::uint8_t>(tag));
  }
  // One frame per read: the read after the completing one is never made.
  StreamConnection connection(1, "peer",
                              std::make_unique<ScriptedStream>(bytes, 0, std::vector<std::size_t>{48}, false));
  RecordingSink sink;
  sink.completes_on = 2;
  connection.receive(sink);
  REQUIRE(sink.messages.size() == 2);
  CHECK(sink.whole == 2);
  connection.receive(sink);
  CHECK(sink.messages.size() == 3);
}

namespace {

// Serves prepared records one at a time, as the shared-memory ring does: a read stops at a
// record's end, and a record nothing of which was read is lent whole in place
// (ByteStream::lend_record) until released.
class RecordStream final : public ByteStream {
 public:
  explicit RecordStream(std::vector<std::vector<std::uint8_t>> records) : records_(std::move(records)) {}
  std::size_t write_some(const iovec*, int) override { return 0; }
  std::size_t read_some(void* data, std::size_t bytes) override {
    if (index_ == records_.size()) return 0;
    const auto& record = records_[index_];
    std::size_t n = std::min(bytes, record.size() - offset_);
    std::memcpy(data, record.data() + offset_, n);
    offset_ += n;
    if (offset_ == record.size()) {
      ++index_;
      offset_ = 0;
    }
    return n;
  }
  std::optional<std::span<const std::uint8_t>> lend_record() override {
    if (offset_ != 0) return std::nullopt;  // begun by a read: read the rest
    if (index_ == records_.size()) return std::span<const std::uint8_t>{};  // nothing arrived
    ++lent;
    return std::span<const std::uint8_t>(records_[index_]);
  }
  void release_record() override {
    ++index_;
    ++released;
  }
  int wakeup_fd() const override { return -1; }
  bool prepare_to_sleep(bool) override { return true; }
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "records"; }
  int lent = 0, released = 0;

 private:
  std::vector<std::vector<std::uint8_t>> records_;
  std::size_t index_ = 0, offset_ = 0;
};

std::vector<std::uint8_t> eager_frame(std::uint64_t tag, std::size_t bytes) {
  FrameHeader header{};
  header.kind = FrameKind::Eager;
  header.tag = tag;
  header.bytes = bytes;
  const auto* raw = reinterpret_cast<const std::uint8_t*>(&header);
  std::vector<std::uint8_t> frame(raw, raw + sizeof header);
  for (std::size_t b = 0; b < bytes; ++b) frame.push_back(static_cast<std::uint8_t>(tag * 31 + b * 7));
  return frame;
}

}  // namespace

TEST_CASE("a small message lent whole by the medium is handled in place, the rest read, in order", "[transport]") {
  // Tags 1..9; which record each frame lies in decides the way it takes.
  std::vector<std::vector<std::uint8_t>> frames;
  const std::vector<std::size_t> lengths = {8, 0, 2000, 8, 16, 8, StreamConnection::kWholeMessageBytes, 8, 8};
  for (std::size_t i = 0; i < lengths.size(); ++i) frames.push_back(eager_frame(i + 1, lengths[i]));
  auto joined = [](const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    std::vector<std::uint8_t> both = a;
    both.insert(both.end(), b.begin(), b.end());
    return both;
  };
  std::vector<std::vector<std::uint8_t>> records = {
      frames[0],                                                       // lent
      frames[1],                                                       // lent: an empty message
      frames[2],                                                       // over the whole-message bound: read
      joined(frames[3], frames[4]),                                    // two frames in one record: read
      std::vector<std::uint8_t>(frames[5].begin(), frames[5].begin() + 43),  // one frame over two records
      std::vector<std::uint8_t>(frames[5].begin() + 43, frames[5].end()),
      frames[6],  // lent: at the bound
      frames[7],  // lent
      frames[8],  // lent
  };
  auto stream = std::make_unique<RecordStream>(records);
  RecordStream& medium = *stream;
  StreamConnection connection(1, "peer", std::move(stream));
  RecordingSink sink;
  for (int polls = 0; polls < 1000 && sink.messages.size() < lengths.size(); ++polls) connection.receive(sink);
  REQUIRE(sink.messages.size() == lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    INFO("message " << i + 1);
    CHECK(sink.messages[i].first == i + 1);
    CHECK(sink.messages[i].second == std::vector<std::uint8_t>(frames[i].begin() + sizeof(FrameHeader), frames[i].end()));
  }
  CHECK(medium.released == 5);
  CHECK(connection.bytes_moved() == [&] {
    std::size_t total = 0;
    for (const auto& record : records) total += record.size();
    return total;
  }());
}

TEST_CASE("a lent message that completes what the caller waits for ends the read there", "[transport]") {
  auto stream = std::make_unique<RecordStream>(
      std::vector<std::vector<std::uint8_t>>{eager_frame(1, 8), eager_frame(2, 8), eager_frame(3, 8)});
  RecordStream& medium = *stream;
  StreamConnection connection(1, "peer", std::move(stream));
  RecordingSink sink;
  sink.completes_on = 2;
  connection.receive(sink);
  REQUIRE(sink.messages.size() == 2);
  CHECK(medium.lent == 2);  // the third record is not even looked at
  connection.receive(sink);
  CHECK(sink.messages.size() == 3);
  CHECK(medium.released == 3);
}
