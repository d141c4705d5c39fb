#include "tests/support/memory_stream.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace comm::testing {
namespace {

struct Direction {
  std::mutex mutex;
  std::deque<std::uint8_t> bytes;
  bool writer_gone = false;
  bool reader_gone = false;
};

// What both ends share: a direction each way and each end's bell.
struct Pipe {
  Direction forward, backward;  // forward: from the lower rank to the higher
  int bells[2] = {::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  ~Pipe() {
    for (int bell : bells) ::close(bell);
  }
};

class MemoryStream final : public transport::ByteStream {
 public:
  MemoryStream(std::shared_ptr<Pipe> pipe, bool lower, int peer, std::size_t capacity)
      : pipe_(std::move(pipe)),
        out_(lower ? pipe_->forward : pipe_->backward),
        in_(lower ? pipe_->backward : pipe_->forward),
        my_bell_(pipe_->bells[lower ? 0 : 1]),
        peer_bell_(pipe_->bells[lower ? 1 : 0]),
        peer_(peer),
        peer_name_("rank " + std::to_string(peer) + " (in this process)"),
        capacity_(capacity) {}

  ~MemoryStream() override {
    {
      std::lock_guard lock(out_.mutex);
      out_.writer_gone = true;
    }
    {
      std::lock_guard lock(in_.mutex);
      in_.reader_gone = true;
    }
    ring(peer_bell_);
  }

  std::size_t write_some(const iovec* vectors, int count) override {
    std::size_t written = 0;
    {
      std::lock_guard lock(out_.mutex);
      if (out_.reader_gone) transport::throw_peer_lost(peer_name_, peer_, "writing to it", EPIPE);
      for (int v = 0; v < count && out_.bytes.size() < capacity_; ++v) {
        const auto* data = static_cast<const std::uint8_t*>(vectors[v].iov_base);
        std::size_t take = std::min(vectors[v].iov_len, capacity_ - out_.bytes.size());
        out_.bytes.insert(out_.bytes.end(), data, data + take);
        written += take;
        if (take < vectors[v].iov_len) break;
      }
    }
    if (written > 0) ring(peer_bell_);
    return written;
  }

  std::size_t read_some(void* data, std::size_t bytes) override {
    std::size_t read = 0;
    {
      std::lock_guard lock(in_.mutex);
      read = std::min(bytes, in_.bytes.size());
      std::copy_n(in_.bytes.begin(), read, static_cast<std::uint8_t*>(data));
      in_.bytes.erase(in_.bytes.begin(), in_.bytes.begin() + static_cast<std::ptrdiff_t>(read));
      if (read == 0 && in_.writer_gone) transport::throw_peer_lost(peer_name_, peer_, "reading from it", 0);
    }
    if (read > 0) ring(peer_bell_);  // room for the writer
    return read;
  }

  int wakeup_fd() const override { return my_bell_; }
  void on_wakeup() override {
    std::uint64_t count = 0;
    while (::read(my_bell_, &count, sizeof count) > 0) {
    }
  }
  // The bell stays rung (an eventfd's count) until on_wakeup reads it, so a ring between this
  // look and the sleep still wakes the thread.
  bool prepare_to_sleep(bool want_write) override {
    {
      std::lock_guard lock(in_.mutex);
      if (!in_.bytes.empty() || in_.writer_gone) return false;
    }
    if (want_write) {
      std::lock_guard lock(out_.mutex);
      if (out_.bytes.size() < capacity_ || out_.reader_gone) return false;
    }
    return true;
  }
  bool writes_wake_through_fd() const override { return false; }
  const char* medium() const override { return "memory"; }
  // Ranks of one process share its memory: the shared-memory collectives may run.
  bool shares_host_memory() const override { return true; }

 private:
  static void ring(int bell) {
    std::uint64_t one = 1;
    while (::write(bell, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  std::shared_ptr<Pipe> pipe_;
  Direction& out_;
  Direction& in_;
  int my_bell_, peer_bell_;
  int peer_;
  std::string peer_name_;
  std::size_t capacity_;
};

}  // namespace

std::vector<std::vector<std::unique_ptr<transport::ByteStream>>> memory_stream_mesh(int ranks, std::size_t capacity) {
  std::vector<std::vector<std::unique_ptr<transport::ByteStream>>> streams(static_cast<std::size_t>(ranks));
  for (auto& row : streams) row.resize(static_cast<std::size_t>(ranks));
  for (int low = 0; low < ranks; ++low) {
    for (int high = low + 1; high < ranks; ++high) {
      auto pipe = std::make_shared<Pipe>();
      streams[low][high] = std::make_unique<MemoryStream>(pipe, true, high, capacity);
      streams[high][low] = std::make_unique<MemoryStream>(pipe, false, low, capacity);
    }
  }
  return streams;
}

}  // namespace comm::testing
