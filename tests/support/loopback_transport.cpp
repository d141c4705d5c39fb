#include "tests/support/loopback_transport.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "libcomm/base/fingerprint.hpp"

namespace comm::testing {

LoopbackWorld::LoopbackWorld(int ranks, std::vector<int> hosts)
    : ranks_(ranks),
      hosts_(std::move(hosts)),
      waiting_(static_cast<std::size_t>(ranks)),
      posted_(static_cast<std::size_t>(ranks)) {}

LoopbackWorld::~LoopbackWorld() {
  for (auto& [key, file] : arena_files_) ::close(file);
}

std::size_t LoopbackWorld::unreceived() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& queue : waiting_) count += queue.size();
  return count;
}

void LoopbackWorld::deliver(const Receive& receive, const Message& message) {
  if (receive.fingerprint != 0 && message.fingerprint != 0 && receive.fingerprint != message.fingerprint) {
    receive.completion->fail(std::make_exception_ptr(MismatchError(
        "rank " + std::to_string(message.source) + " sent " + detail::describe_fingerprint(message.fingerprint) +
        " to a receive of " + detail::describe_fingerprint(receive.fingerprint))));
    return;
  }
  if (message.bytes.size() > receive.capacity) {
    receive.completion->fail(
        std::make_exception_ptr(InvalidArgumentError("a message of " + std::to_string(message.bytes.size()) +
                                                     " bytes for a receive of " + std::to_string(receive.capacity))));
    return;
  }
  if (receive.reduction) {
    receive.reduction(receive.data, message.bytes.data(), message.bytes.size() / receive.reduction.element);
  } else if (!message.bytes.empty()) {
    std::memcpy(receive.data, message.bytes.data(), message.bytes.size());
  }
  receive.completion->complete(message.bytes.size(), message.source);
}

int LoopbackWorld::arena_file(const std::string& key, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto found = arena_files_.find(key);
  if (found != arena_files_.end()) return found->second;
  int file = ::memfd_create("loopback-arena", MFD_CLOEXEC);
  if (file < 0 || ::ftruncate(file, static_cast<off_t>(bytes)) != 0) {
    throw std::system_error(errno, std::generic_category(), "memfd for a loopback arena");
  }
  arena_files_.emplace(key, file);
  return file;
}

LoopbackTransport::LoopbackTransport(LoopbackWorld& world, int rank, int reducing_receives)
    : world_(world), rank_(rank), reducing_receives_(reducing_receives) {}

std::unique_ptr<transport::SharedArena> LoopbackTransport::map_shared_arena(Store&, const std::string& key, int,
                                                                            int size, std::chrono::milliseconds,
                                                                            std::size_t slot_bytes) {
  // The layout the shm medium maps (transport/shm/shared_arena.cpp): controls, then two sets of
  // size + 1 slots.
  std::size_t bytes = static_cast<std::size_t>(size) * sizeof(transport::SharedArena::Control) +
                      2 * static_cast<std::size_t>(size + 1) * slot_bytes;
  int file = world_.arena_file(key, bytes);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
  if (base == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mapping a loopback arena");
  return std::make_unique<transport::SharedArena>(base, bytes, size, slot_bytes);
}

std::shared_ptr<detail::Completion> LoopbackTransport::isend(int peer, const void* data, std::size_t bytes,
                                                             std::uint64_t tag, std::uint64_t fingerprint) {
  auto done = std::make_shared<detail::Completion>();
  if (transport::is_probe(tag)) {
    done->complete(0, rank_);
    return done;
  }
  const auto* begin = static_cast<const std::uint8_t*>(data);
  LoopbackWorld::Message message{rank_, tag, fingerprint, std::vector<std::uint8_t>(begin, begin + bytes)};
  {
    std::lock_guard lock(world_.mutex_);
    auto& posted = world_.posted_[static_cast<std::size_t>(peer)];
    auto match = std::find_if(posted.begin(), posted.end(),
                              [&](const auto& receive) { return LoopbackWorld::matches(receive, rank_, tag); });
    if (match != posted.end()) {
      LoopbackWorld::Receive receive = std::move(*match);
      posted.erase(match);
      LoopbackWorld::deliver(receive, message);
    } else {
      world_.waiting_[static_cast<std::size_t>(peer)].push_back(std::move(message));
    }
  }
  done->complete(bytes, rank_);
  return done;
}

std::shared_ptr<detail::Completion> LoopbackTransport::irecv(int peer, void* data, std::size_t capacity,
                                                             std::uint64_t tag, std::uint64_t fingerprint) {
  auto completion = std::make_shared<detail::Completion>();
  irecv_into(completion, peer, data, capacity, tag, fingerprint);
  return completion;
}

std::shared_ptr<detail::Completion> LoopbackTransport::irecv_reduce(int peer, void* data, std::size_t capacity,
                                                                    std::uint64_t tag,
                                                                    const transport::Combiner& reduction,
                                                                    std::uint64_t fingerprint) {
  if (reducing_receives_ == 0) return nullptr;
  if (reducing_receives_ > 0) --reducing_receives_;
  auto completion = std::make_shared<detail::Completion>();
  post({peer, tag, fingerprint, data, capacity, reduction, completion});
  return completion;
}

void LoopbackTransport::irecv_into(std::shared_ptr<detail::Completion> completion, int peer, void* data,
                                   std::size_t capacity, std::uint64_t tag, std::uint64_t fingerprint) {
  post({peer, tag, fingerprint, data, capacity, {}, std::move(completion)});
}

// Deliveries happen under the world's lock: a receive not done is still posted.
bool LoopbackTransport::cancel(const detail::Completion* completion) {
  std::lock_guard lock(world_.mutex_);
  if (completion->done()) return true;
  auto& posted = world_.posted_[static_cast<std::size_t>(rank_)];
  auto found = std::find_if(posted.begin(), posted.end(),
                            [&](const auto& receive) { return receive.completion.get() == completion; });
  if (found == posted.end()) return false;
  posted.erase(found);
  return true;
}

void LoopbackTransport::post(LoopbackWorld::Receive receive) {
  std::lock_guard lock(world_.mutex_);
  auto& waiting = world_.waiting_[static_cast<std::size_t>(rank_)];
  auto match = std::find_if(waiting.begin(), waiting.end(), [&](const auto& message) {
    return LoopbackWorld::matches(receive, message.source, message.tag);
  });
  if (match != waiting.end()) {
    LoopbackWorld::Message message = std::move(*match);
    waiting.erase(match);
    LoopbackWorld::deliver(receive, message);
  } else {
    world_.posted_[static_cast<std::size_t>(rank_)].push_back(std::move(receive));
  }
}

}  // namespace comm::testing
