#include "transport/shm/shared_arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#include "comm/error.hpp"
#include "libcomm/base/log.hpp"
#include "transport/shm/shm_segment.hpp"

namespace comm::transport {
namespace {

std::size_t segment_bytes(int size, std::size_t slot_bytes) {
  return static_cast<std::size_t>(size) * sizeof(SharedArena::Control) +
         2 * static_cast<std::size_t>(size + 1) * slot_bytes;
}

[[noreturn]] void fail(const std::string& what, const std::string& name, int rank) {
  throw IoError(what + " shared memory '" + name + "': " + std::strerror(errno) +
                    "; is /dev/shm mounted and large enough? COMM_ALGO=ring (or COMM_TRANSPORT=tcp) avoids it",
                ErrorContext{.rank = rank, .op = "shared_arena"});
}

void* map(int fd, std::size_t bytes, const std::string& name, int rank) {
  // Populated at once, like the pair rings: faulting pages in lazily costs microseconds per page.
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) fail("cannot map", name, rank);
  return base;
}

std::size_t read_slot_bytes(const std::string& text, int rank) {
  std::size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < SharedArena::kMinSlotBytes ||
      value > SharedArena::kMaxSlotBytes || value % SharedArena::kMinSlotBytes != 0) {
    throw IoError("rank 0 published slot size '" + text + "' for the shared-memory collectives: not a multiple of " +
                      std::to_string(SharedArena::kMinSlotBytes) + " up to " +
                      std::to_string(SharedArena::kMaxSlotBytes) + " (a stranger's answer in the store?)",
                  ErrorContext{.rank = rank, .peer = 0, .op = "shared_arena"});
  }
  return value;
}

}  // namespace

SharedArena::SharedArena(void* base, std::size_t bytes, int size, std::size_t slot_bytes)
    : base_(base),
      bytes_(bytes),
      size_(size),
      slot_bytes_(slot_bytes),
      controls_(static_cast<Control*>(base)),
      data_(static_cast<std::uint8_t*>(base) + static_cast<std::size_t>(size) * sizeof(Control)) {}

SharedArena::~SharedArena() { ::munmap(base_, bytes_); }

std::unique_ptr<SharedArena> create_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                 std::chrono::milliseconds timeout, std::size_t slot_bytes) {
  // Every rank ends with an arena, or every rank with none (one rank could not make or map the
  // segment: /dev/shm full, say); the group then runs its other algorithms, having said why.
  // Rank 0's slot size is everyone's (COMM_SHM_SLOT_BYTES may differ between ranks' environments).
  std::size_t bytes = segment_bytes(size, slot_bytes);
  std::unique_ptr<SharedArena> arena;
  std::string problem;
  bool usable = false;
  CreatedSegment created;
  if (rank == 0) {
    std::random_device random;
    std::string name = "/comm-arena-" + std::to_string(::getpid()) + "-" + std::to_string(random());
    try {
      // Nameless once made; held open until every rank has said whether it mapped it.
      created = create_segment(name, bytes);
      if (!created.problem.empty()) {
        throw IoError(created.problem + "; COMM_ALGO=ring avoids this segment",
                      ErrorContext{.rank = rank, .op = "shared_arena"});
      }
      void* base = map(created.file.get(), bytes, name, rank);
      // A fresh segment is zero-filled: every flag starts at epoch 0. The Control objects are
      // constructed in place (their atomics are lock-free and zero is their initial value).
      for (int r = 0; r < size; ++r) new (static_cast<SharedArena::Control*>(base) + r) SharedArena::Control();
      arena = std::make_unique<SharedArena>(base, bytes, size, slot_bytes);
    } catch (const Error& error) {
      problem = error.what();
    }
    // "SLOT_BYTES PATH" (no path: rank 0 could not make it), one key for every rank to read.
    store.set(key + "/name", std::to_string(slot_bytes) + " " + (problem.empty() ? created.path : ""));
    usable = problem.empty();
    for (int r = 1; r < size; ++r) {
      usable = store.get_string(key + "/mapped/" + std::to_string(r)) == "1" && usable;  // waits for it
    }
    store.set(key + "/usable", usable ? "1" : "0");
    created.file.reset();
  } else {
    std::string published = store.get_string(key + "/name");
    auto space = published.find(' ');
    std::string name = space == std::string::npos ? "" : published.substr(space + 1);
    try {
      if (name.empty()) throw IoError("rank 0 could not make it", ErrorContext{.rank = rank});
      slot_bytes = read_slot_bytes(published.substr(0, space), rank);
      bytes = segment_bytes(size, slot_bytes);
      auto file = open_segment(name, bytes);
      if (!file.valid()) throw IoError("rank 0 let go of it before this rank opened it", ErrorContext{.rank = rank});
      arena = std::make_unique<SharedArena>(map(file.get(), bytes, name, rank), bytes, size, slot_bytes);
    } catch (const Error& error) {
      problem = error.what();
    }
    store.set(key + "/mapped/" + std::to_string(rank), problem.empty() ? "1" : "0");
    usable = store.get_string(key + "/usable") == "1";
  }
  // The store may live in rank 0's process: it returns only once every rank is done with it
  // here, so a job whose rank 0 exits right after making the group cannot strand the others.
  if (rank == 0) {
    std::vector<std::string> read;
    for (int r = 1; r < size; ++r) read.push_back(key + "/read/" + std::to_string(r));
    store.wait(read, timeout);
  } else {
    store.set(key + "/read/" + std::to_string(rank), "1");
  }
  if (!problem.empty()) {
    log::get(log::Subsystem::Transport).warn("no shared-memory collectives for this group: {}", problem);
  }
  return usable ? std::move(arena) : nullptr;
}

}  // namespace comm::transport
