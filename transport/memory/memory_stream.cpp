#include "transport/memory/memory_stream.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "libcomm/base/guarded_file.hpp"

namespace comm::transport {
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
  LentSlots lent[2];            // [0]: the lower rank's leases, [1]: the higher's
  OwnedDescriptor bells[2] = {make_bell(), make_bell()};

  static OwnedDescriptor make_bell() {
    OwnedDescriptor bell(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!bell.valid()) throw IoError(std::string("eventfd for an in-memory pipe: ") + std::strerror(errno), {});
    return bell;
  }
};

class MemoryStream final : public ByteStream {
 public:
  // `connection`: the pair's mesh socket (or none), kept open while the stream lives: a peer still
  // setting up takes a closed one for this rank's death.
  MemoryStream(std::shared_ptr<Pipe> pipe, bool lower, int peer, std::string peer_name, std::size_t capacity,
               Socket connection = Socket(), ReadLent read_lent = nullptr)
      : pipe_(std::move(pipe)),
        out_(lower ? pipe_->forward : pipe_->backward),
        in_(lower ? pipe_->backward : pipe_->forward),
        my_bell_(pipe_->bells[lower ? 0 : 1].get()),
        peer_bell_(pipe_->bells[lower ? 1 : 0].get()),
        peer_(peer),
        peer_name_(std::move(peer_name)),
        capacity_(capacity),
        connection_(std::move(connection)),
        lent_(&pipe_->lent[lower ? 0 : 1], &pipe_->lent[lower ? 1 : 0], read_lent ? read_lent : read_this_process,
              ::getpid()) {}

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
      if (out_.reader_gone) throw_peer_lost(peer_name_, peer_, "writing to it", EPIPE);
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
      if (read == 0 && in_.writer_gone) throw_peer_lost(peer_name_, peer_, "reading from it", 0);
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
  // One process: a lent buffer is read with a plain copy, the single-copy protocol unchanged.
  LentBuffers* lent_buffers() override { return &lent_; }

 private:
  static int read_this_process(std::int64_t, std::uint64_t address, void* into, std::size_t bytes) {
    std::memcpy(into, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address)), bytes);
    return 0;
  }
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
  Socket connection_;
  LentBuffers lent_;
};

std::string name_in_this_process(int peer) { return "rank " + std::to_string(peer) + " (in this process)"; }

constexpr std::size_t kPipeCapacity = 256 << 10;

// This process, told apart from every other (a pid alone repeats across hosts and namespaces).
const std::string& process_token() {
  static const std::string token = [] {
    std::random_device random;
    return std::to_string(::getpid()) + "/" + std::to_string(random()) + std::to_string(random());
  }();
  return token;
}

// The pipes whose first end is made and whose second is not yet taken, by pair. Weak: a pipe
// whose first end is gone (its rank failed) is not handed to the second.
std::mutex pipes_mutex;
std::map<std::string, std::weak_ptr<Pipe>> waiting_pipes;

class MemorySession final : public MediumSession {
 public:
  explicit MemorySession(const MediumJob& job) : rank_(job.rank), job_id_(job.job_id), processes_(job.size) {
    // Every rank says which process it is; a peer whose answer is ours is a thread beside us.
    job.store.set(key(job.rank), process_token());
    for (int peer = 0; peer < job.size; ++peer) {
      if (peer != job.rank) processes_[peer] = job.store.get_string(key(peer));
    }
  }
  std::string cannot_reach(int peer) const override {
    // Said from this rank's side, and read on every rank (the first cause is the job's): so it
    // names whose process, not "this" one.
    if (processes_[peer] == process_token()) return "";
    return "is not a thread of rank " + std::to_string(rank_) + "'s process";
  }
  bool reaches(int peer) const override { return cannot_reach(peer).empty(); }
  std::unique_ptr<ByteStream> open(int peer, const std::string& peer_name, Socket connection,
                                   std::vector<Socket>) override {
    bool lower = rank_ < peer;
    std::string pair =
        job_id_ + "/" + std::to_string(std::min(rank_, peer)) + "/" + std::to_string(std::max(rank_, peer));
    std::shared_ptr<Pipe> pipe;
    {
      std::lock_guard lock(pipes_mutex);
      std::erase_if(waiting_pipes, [](const auto& entry) { return entry.second.expired(); });
      auto found = waiting_pipes.find(pair);
      if (found != waiting_pipes.end()) {
        pipe = found->second.lock();
        waiting_pipes.erase(found);
      } else {
        pipe = std::make_shared<Pipe>();
        waiting_pipes[pair] = pipe;
      }
    }
    return std::make_unique<MemoryStream>(std::move(pipe), lower, peer, peer_name, kPipeCapacity,
                                          std::move(connection));
  }
  std::string description() const override { return "memory"; }

 private:
  std::string key(int rank) const { return "medium/memory/" + job_id_ + "/" + std::to_string(rank); }

  int rank_;
  std::string job_id_;
  std::vector<std::string> processes_;
};

}  // namespace

std::vector<std::vector<std::unique_ptr<ByteStream>>> memory_stream_mesh(int ranks, std::size_t capacity,
                                                                         ReadLent read_lent) {
  std::vector<std::vector<std::unique_ptr<ByteStream>>> streams(static_cast<std::size_t>(ranks));
  for (auto& row : streams) row.resize(static_cast<std::size_t>(ranks));
  for (int low = 0; low < ranks; ++low) {
    for (int high = low + 1; high < ranks; ++high) {
      auto pipe = std::make_shared<Pipe>();
      streams[low][high] =
          std::make_unique<MemoryStream>(pipe, true, high, name_in_this_process(high), capacity, Socket(), read_lent);
      streams[high][low] =
          std::make_unique<MemoryStream>(pipe, false, low, name_in_this_process(low), capacity, Socket(), read_lent);
    }
  }
  return streams;
}

MediumEntry memory_medium() {
  return {.name = "memory", .automatic = false, .needs_connection = false, .open = [](const MediumJob& job) {
            return std::unique_ptr<MediumSession>(std::make_unique<MemorySession>(job));
          }};
}

}  // namespace comm::transport
