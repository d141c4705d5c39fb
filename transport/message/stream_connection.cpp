#include "transport/message/stream_connection.hpp"

#include <algorithm>
#include <cstring>

#include "comm/error.hpp"

namespace comm::transport {
namespace {

constexpr std::size_t kInboxBytes = 256 * 1024;
// Payload left to read beyond this goes straight into its destination, not through the inbox.
constexpr std::size_t kDirectReadBytes = 32 * 1024;
// At most this much is read into the inbox at once: enough for a burst of small frames in one
// system call, little enough that the payload of a large frame that comes in the same read as
// its header (and so is copied twice, into the inbox and out) is a small part of it.
constexpr std::size_t kInboxReadBytes = kDirectReadBytes;
constexpr int kMaxIovecs = 64;

}  // namespace

class StreamConnection::Deliverer final : public ByteStream::RunSink {
 public:
  explicit Deliverer(StreamConnection& connection) : connection_(connection) {}
  void operator()(const std::uint8_t* run, std::size_t bytes) override { connection_.deliver(run, bytes); }

 private:
  StreamConnection& connection_;
};

StreamConnection::StreamConnection(int peer, std::string peer_name, std::unique_ptr<ByteStream> stream)
    : peer_(peer), peer_name_(std::move(peer_name)), stream_(std::move(stream)), inbox_(kInboxBytes) {}

void StreamConnection::queue(const FrameHeader& header, const void* payload,
                             std::shared_ptr<detail::Completion> on_written) {
  std::size_t payload_bytes = has_payload(header.kind) ? header.bytes : 0;
  outbox_.push_back({header, static_cast<const std::uint8_t*>(payload), payload_bytes, 0, std::move(on_written), {}});
}

bool StreamConnection::keep_rest(const FrameHeader& header, const void* payload, std::size_t payload_bytes,
                                 std::size_t written) {
  if (written == 0) return false;
  Outgoing rest{header, nullptr, payload_bytes, written, nullptr, {}};
  const auto* begin = static_cast<const std::uint8_t*>(payload);
  rest.owned.assign(begin, begin + payload_bytes);
  rest.payload = rest.owned.data();
  outbox_.push_back(std::move(rest));
  return true;
}

bool StreamConnection::flush() {
  while (!outbox_.empty()) {
    iovec vectors[kMaxIovecs];
    int count = 0;
    for (auto it = outbox_.begin(); it != outbox_.end() && count + 2 <= kMaxIovecs; ++it) {
      std::size_t skip = it->written;
      if (skip < sizeof(FrameHeader)) {
        vectors[count++] = {reinterpret_cast<std::uint8_t*>(&it->header) + skip, sizeof(FrameHeader) - skip};
        skip = 0;
      } else {
        skip -= sizeof(FrameHeader);
      }
      if (it->payload_bytes > skip) {
        vectors[count++] = {const_cast<std::uint8_t*>(it->payload) + skip, it->payload_bytes - skip};
      }
    }
    std::size_t left = stream_->write_some(vectors, count);
    if (left == 0) return false;
    bytes_moved_ += left;
    while (!outbox_.empty()) {
      Outgoing& front = outbox_.front();
      std::size_t total = sizeof(FrameHeader) + front.payload_bytes;
      std::size_t take = std::min(left, total - front.written);
      front.written += take;
      left -= take;
      if (front.written < total) break;
      if (front.on_written) front.on_written->complete(front.payload_bytes, -1);
      outbox_.pop_front();
    }
  }
  return true;
}

void StreamConnection::receive(Sink& sink) {
  while (true) {
    // Once a frame completed what the caller waits for and nothing more is buffered, stop: it
    // can go on now, and looking for the next frame would cost a cache miss on the ring line (or
    // a system call on the socket) the peer is about to write, on the critical path of a
    // ping-pong. Otherwise read on: a burst of messages is taken in one call.
    if (consume(sink) && !in_payload_ && inbox_begin_ == inbox_end_) return;
    // Read more: large payload remainders straight into their destination.
    if (in_payload_ && payload_target_ != nullptr && current_.bytes - payload_done_ >= kDirectReadBytes) {
      std::size_t n;
      if (reduction_ != nullptr) {
        // Combined as it comes off the medium (the shared-memory ring itself), never through a
        // whole-message copy.
        Deliverer deliverer(*this);
        n = stream_->read_through(current_.bytes - payload_done_, deliverer);
      } else {
        n = stream_->read_some(payload_target_ + payload_done_, current_.bytes - payload_done_);
        payload_done_ += n;
      }
      if (n == 0) return;
      bytes_moved_ += n;
      continue;
    }
    if (inbox_begin_ == inbox_end_) {
      inbox_begin_ = inbox_end_ = 0;
      if (!in_payload_) {
        Lent lent = take_lent_message(sink);
        if (lent == Lent::Completed || lent == Lent::Nothing) return;  // nothing is buffered
        if (lent == Lent::Delivered) continue;
      }
    } else if (inbox_begin_ > 0 && inbox_.size() - inbox_end_ < sizeof(FrameHeader)) {
      std::memmove(inbox_.data(), inbox_.data() + inbox_begin_, inbox_end_ - inbox_begin_);
      inbox_end_ -= inbox_begin_;
      inbox_begin_ = 0;
    }
    std::size_t n =
        stream_->read_some(inbox_.data() + inbox_end_, std::min(inbox_.size() - inbox_end_, kInboxReadBytes));
    if (n == 0) return;
    bytes_moved_ += n;
    inbox_end_ += n;
  }
}

// Saves the small message's copy into the inbox (and the inbox's bookkeeping) on the path of
// every arrival over shared memory.
StreamConnection::Lent StreamConnection::take_lent_message(Sink& sink) {
  std::optional<std::span<const std::uint8_t>> lent = stream_->lend_record();
  if (!lent) return Lent::Read;
  std::span<const std::uint8_t> record = *lent;
  if (record.empty()) return Lent::Nothing;
  if (record.size() < sizeof(FrameHeader)) return Lent::Read;
  FrameHeader header;
  std::memcpy(&header, record.data(), sizeof header);
  // One record, one whole frame (a record holding more, or less, is read instead).
  std::size_t available = record.size() - sizeof header;
  if (!whole_message(header, available) || available != header.bytes) return Lent::Read;
  Sink::Handled handled = sink.on_message(*this, header, record.data() + sizeof header);
  if (handled == Sink::Handled::NotHere) return Lent::Read;
  stream_->release_record();
  bytes_moved_ += record.size();
  return handled == Sink::Handled::Completed ? Lent::Completed : Lent::Delivered;
}

// Dispatches every complete header and payload byte held in the inbox; true when a frame
// completed what the caller waits for.
bool StreamConnection::consume(Sink& sink) {
  bool completed = false;
  while (true) {
    if (!in_payload_) {
      if (inbox_end_ - inbox_begin_ < sizeof(FrameHeader)) return completed;
      std::memcpy(&current_, inbox_.data() + inbox_begin_, sizeof(FrameHeader));
      inbox_begin_ += sizeof(FrameHeader);
      if (whole_message(current_, inbox_end_ - inbox_begin_)) {
        Sink::Handled handled = sink.on_message(*this, current_, inbox_.data() + inbox_begin_);
        if (handled != Sink::Handled::NotHere) {
          inbox_begin_ += current_.bytes;
          completed = completed || handled == Sink::Handled::Completed;
          continue;
        }
      }
      payload_done_ = 0;
      payload_target_ = nullptr;
      reduction_ = nullptr;
      carry_bytes_ = 0;
      PayloadTarget target = sink.on_header(*this, current_);
      if (!has_payload(current_.kind)) continue;
      payload_target_ = target.data;
      reduction_ = target.data != nullptr ? target.reduction : nullptr;
      in_payload_ = true;
    }
    std::size_t available = std::min(inbox_end_ - inbox_begin_, current_.bytes - payload_done_);
    if (payload_target_ != nullptr) {
      deliver(inbox_.data() + inbox_begin_, available);
    } else {
      payload_done_ += available;
    }
    inbox_begin_ += available;
    if (payload_done_ < current_.bytes) return completed;
    in_payload_ = false;
    completed = sink.on_payload(*this, current_) || completed;
  }
}

void StreamConnection::deliver(const std::uint8_t* run, std::size_t bytes) {
  if (bytes == 0) return;
  if (reduction_ == nullptr) {
    std::memcpy(payload_target_ + payload_done_, run, bytes);
    payload_done_ += bytes;
    return;
  }
  std::size_t element = reduction_->element;
  if (carry_bytes_ > 0) {  // finish the element the last run began
    std::size_t take = std::min(element - carry_bytes_, bytes);
    std::memcpy(carry_ + carry_bytes_, run, take);
    carry_bytes_ += take;
    payload_done_ += take;
    run += take;
    bytes -= take;
    if (carry_bytes_ < element) return;
    (*reduction_)(payload_target_ + payload_done_ - element, carry_, 1);
    carry_bytes_ = 0;
  }
  std::size_t elements = bytes / element;
  combine_run(*reduction_, payload_target_ + payload_done_, run, elements);
  payload_done_ += elements * element;
  std::size_t rest = bytes - elements * element;
  if (rest > 0) {
    std::memcpy(carry_, run + elements * element, rest);
    carry_bytes_ = rest;
    payload_done_ += rest;
  }
}

void combine_run(const Combiner& reduction, std::uint8_t* target, const std::uint8_t* run, std::size_t elements) {
  if (elements == 0) return;
  std::size_t element = reduction.element;
  if (reinterpret_cast<std::uintptr_t>(run) % element == 0) {
    reduction(target, run, elements);
    return;
  }
  // Bytes that follow a message of odd length in the stream (rare): realigned in pieces first.
  alignas(64) std::uint8_t aligned[4096];
  std::size_t per_piece = sizeof aligned / element;
  for (std::size_t done = 0; done < elements;) {
    std::size_t count = std::min(per_piece, elements - done);
    std::memcpy(aligned, run + done * element, count * element);
    reduction(target + done * element, aligned, count);
    done += count;
  }
}

std::vector<std::shared_ptr<detail::Completion>> StreamConnection::take_queued() {
  std::vector<std::shared_ptr<detail::Completion>> taken;
  for (auto& item : outbox_) {
    if (item.on_written) taken.push_back(std::move(item.on_written));
  }
  outbox_.clear();
  return taken;
}

std::vector<std::shared_ptr<detail::Completion>> StreamConnection::release(
    const std::function<bool(const FrameHeader&)>& chosen) {
  auto released = [&](const FrameHeader& header) { return carries_callers_bytes(header.kind) && chosen(header); };
  if (in_payload_ && released(current_)) {
    payload_target_ = nullptr;
    reduction_ = nullptr;
    carry_bytes_ = 0;
  }
  std::vector<std::shared_ptr<detail::Completion>> let_go;
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    if (!released(it->header)) {
      ++it;
      continue;
    }
    if (it->on_written) let_go.push_back(std::move(it->on_written));
    if (it->written == 0) {
      it = outbox_.erase(it);
      continue;
    }
    // Begun: the stream's framing needs the rest (the receiver drops it, or takes it as sent).
    if (it->owned.empty() && it->payload_bytes > 0) {
      it->owned.assign(it->payload, it->payload + it->payload_bytes);
      it->payload = it->owned.data();
    }
    ++it;
  }
  return let_go;
}

}  // namespace comm::transport
