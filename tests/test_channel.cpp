// One peer's channel (transport/message/channel.hpp) against a stream that records what is
// written: frames wait for a connection made on first use and leave in order; a ClearToSend
// queues the large send's payload, which leaves only when the channel flushes (data goes down
// from the channel's own step, never from inside the handler that read the ClearToSend); a
// withdrawn send is never written; a lost channel fails everything pending.
#include <catch2/catch_test_macros.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "transport/message/channel.hpp"

using comm::transport::ByteStream;
using comm::transport::Channel;
using comm::transport::FrameHeader;
using comm::transport::FrameKind;
using comm::transport::make_frame;
using comm::transport::StreamConnection;

namespace {

// Takes everything written, up to `room` bytes (then nothing until more room is given).
class RecordingStream final : public ByteStream {
 public:
  explicit RecordingStream(std::vector<std::uint8_t>& written) : written_(written) {}
  std::size_t write_some(const iovec* vectors, int count) override {
    std::size_t taken = 0;
    for (int v = 0; v < count && room > 0; ++v) {
      std::size_t take = std::min(room, vectors[v].iov_len);
      const auto* begin = static_cast<const std::uint8_t*>(vectors[v].iov_base);
      written_.insert(written_.end(), begin, begin + take);
      room -= take;
      taken += take;
      if (take < vectors[v].iov_len) break;
    }
    return taken;
  }
  std::size_t read_some(void*, std::size_t) override { return 0; }
  int wakeup_fd() const override { return 7; }
  bool prepare_to_sleep(bool) override { return true; }
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "recording"; }
  std::size_t room = ~std::size_t{0};

 private:
  std::vector<std::uint8_t>& written_;
};

// The frames in `bytes`, in order (headers, their payloads skipped).
std::vector<FrameHeader> frames_in(const std::vector<std::uint8_t>& bytes) {
  std::vector<FrameHeader> frames;
  for (std::size_t at = 0; at + sizeof(FrameHeader) <= bytes.size();) {
    FrameHeader header;
    std::memcpy(&header, bytes.data() + at, sizeof header);
    frames.push_back(header);
    bool payload = header.kind == FrameKind::Eager || header.kind == FrameKind::Data;
    at += sizeof header + (payload ? header.bytes : 0);
  }
  return frames;
}

struct Connected {
  std::vector<std::uint8_t> written;
  RecordingStream* stream = nullptr;
  Channel channel;
  Connected() {
    auto owned = std::make_unique<RecordingStream>(written);
    stream = owned.get();
    channel.attach(std::make_unique<StreamConnection>(1, "rank 1", std::move(owned)));
  }
};

auto completion() { return std::make_shared<comm::detail::Completion>(); }

}  // namespace

TEST_CASE("frames wait for a connection made on first use and leave in order once it is", "[channel]") {
  Channel channel;
  std::uint64_t payload = 42;
  auto written = completion();
  CHECK(channel.send(make_frame(FrameKind::Eager, 5, 8), &payload, written, true) == Channel::Sent::Waiting);
  CHECK(channel.send(make_frame(FrameKind::ReadyToSend, 6, 1 << 20, 1), nullptr, nullptr, true) ==
        Channel::Sent::Waiting);
  CHECK_FALSE(written->done());
  std::vector<std::uint8_t> bytes;
  channel.attach(std::make_unique<StreamConnection>(1, "rank 1", std::make_unique<RecordingStream>(bytes)));
  CHECK(bytes.empty());  // queued on the new connection, written by the channel's flush
  CHECK_FALSE(channel.flush());
  auto frames = frames_in(bytes);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].kind == FrameKind::Eager);
  CHECK(frames[0].tag == 5);
  CHECK(frames[1].kind == FrameKind::ReadyToSend);
  CHECK(written->done());
  CHECK_FALSE(written->failed());
}

TEST_CASE("without a connection to wait for, a send fails at once", "[channel]") {
  Channel channel;
  channel.set_error(std::make_exception_ptr(comm::PeerClosedError("rank 1 is gone")));
  auto written = completion();
  CHECK(channel.send(make_frame(FrameKind::Eager, 5, 0), nullptr, written, true) == Channel::Sent::Failed);
  CHECK(written->failed());
}

TEST_CASE("a cleared large send is written by the channel's flush, not when the clearance is read", "[channel]") {
  Connected peer;
  std::vector<std::uint8_t> payload(100000, 0xAB);
  auto sent = completion();
  peer.channel.await_clearance(9, {payload.data(), payload.size(), 77, sent});
  CHECK(peer.channel.cleared_to_send(9) == Channel::Clearance::Queued);
  CHECK(peer.written.empty());
  CHECK_FALSE(sent->done());
  peer.stream->room = 1000;  // the stream takes part of it: the rest stays queued
  CHECK(peer.channel.flush());
  CHECK_FALSE(sent->done());
  peer.stream->room = ~std::size_t{0};
  CHECK_FALSE(peer.channel.flush());
  CHECK(sent->done());
  auto frames = frames_in(peer.written);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].kind == FrameKind::Data);
  CHECK(frames[0].id == 9);
  CHECK(frames[0].bytes == payload.size());
  CHECK(peer.written.size() == sizeof(FrameHeader) + payload.size());
  CHECK(peer.written.back() == 0xAB);
  // The same clearance again is a protocol error the caller reports.
  CHECK(peer.channel.cleared_to_send(9) == Channel::Clearance::Unknown);
}

TEST_CASE("a large send of a revoked group is withdrawn and never written", "[channel]") {
  Connected peer;
  std::vector<std::uint8_t> payload(100000, 1);
  auto revoked = completion(), other = completion();
  peer.channel.await_clearance(1, {payload.data(), payload.size(), 10, revoked});
  peer.channel.await_clearance(2, {payload.data(), payload.size(), 20, other});
  auto error = std::make_exception_ptr(comm::RevokedError("group revoked"));
  peer.channel.release([](std::uint64_t tag) { return tag == 10; }, error);
  CHECK(revoked->failed());
  CHECK_FALSE(other->done());
  CHECK(peer.channel.cleared_to_send(1) == Channel::Clearance::Withdrawn);
  CHECK(peer.channel.cleared_to_send(2) == Channel::Clearance::Queued);
  peer.channel.flush();
  auto frames = frames_in(peer.written);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].id == 2);
}

TEST_CASE("a lost channel fails everything pending and names the error its peer said goodbye with", "[channel]") {
  Connected peer;
  std::vector<std::uint8_t> payload(100000, 1);
  auto announced = completion(), expected = completion();
  peer.channel.await_clearance(1, {payload.data(), payload.size(), 10, announced});
  comm::transport::PostedReceive receive;
  receive.completion = expected;
  peer.channel.expect_data(4, receive);
  std::string why = "rank 3 died";
  std::memcpy(peer.channel.hear_goodbye(1 + static_cast<int>(comm::ErrorCode::PeerClosed), 1 + 3, why.size()),
              why.data(), why.size());
  CHECK_FALSE(peer.channel.left_in_order());
  auto error = peer.channel.loss_error(std::make_exception_ptr(comm::IoError("end of file")), 0, 1, "rank 1", true);
  CHECK(peer.channel.fail_all(error) == 7);
  CHECK(peer.channel.lost());
  CHECK(announced->failed());
  CHECK(expected->failed());
  try {
    std::rethrow_exception(error);
  } catch (const comm::PeerClosedError& relayed) {
    CHECK(relayed.peer() == 3);  // the dead rank, not the healthy one that passed it on
    CHECK(relayed.message() == why);
  }
}

// Telling the progress thread to watch for room is a system call: the channel says when the
// wish changed, so a service that finds output still queued does not repeat it.
TEST_CASE("the channel reports only changes of whether its output is watched", "[channel]") {
  Channel channel;
  CHECK_FALSE(channel.watch_output(false));
  CHECK(channel.watch_output(true));
  CHECK_FALSE(channel.watch_output(true));
  CHECK(channel.watch_output(false));
}
