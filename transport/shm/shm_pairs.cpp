#include "transport/shm/shm_pairs.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "libcomm/base/log.hpp"
#include "transport/shm/shm_segment.hpp"

namespace comm::transport {
namespace {

std::string segment_key(int rank) { return "shm/segment/" + std::to_string(rank); }
std::string host_key(int leader) { return "shm/host/" + std::to_string(leader); }
constexpr char kShortage = '!';  // an entry that starts so is a rank's reason it has no segment

std::size_t page_bytes() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// A receive segment: the rings' headers first, together (a page or a few), then the rings'
// data, each a power of two and so whole pages: a writer maps the headers and its own ring.
std::size_t headers_bytes(std::size_t peers) {
  std::size_t page = page_bytes();
  return (peers * sizeof(RingHeader) + page - 1) / page * page;
}
std::size_t segment_bytes(std::size_t peers, std::size_t ring_bytes) {
  return headers_bytes(peers) + peers * ring_bytes;
}

// Where `writer`'s ring lies in the segment of `reader`: the writers in rank order, the reader
// itself left out.
std::size_t slot_of(const std::vector<int>& host_ranks, int reader, int writer) {
  std::size_t index =
      static_cast<std::size_t>(std::find(host_ranks.begin(), host_ranks.end(), writer) - host_ranks.begin());
  return writer > reader ? index - 1 : index;
}

std::shared_ptr<SharedSegment> map_segment(int fd, std::size_t bytes, std::size_t offset, const std::string& name,
                                           OwnedDescriptor keep_open = OwnedDescriptor{}) {
  // Not populated: the pages are reserved already (shm_segment.hpp), and each stream faults its
  // rings in on first use (ShmStream::map_in), so peers never talked to cost no page tables.
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (base == MAP_FAILED) {
    throw IoError("cannot map shared memory '" + name + "': " + std::strerror(errno) +
                      "; is /dev/shm mounted and large enough? COMM_TRANSPORT=tcp avoids shared memory",
                  ErrorContext{.op = "transport.shm"});
  }
  return std::make_shared<SharedSegment>(base, bytes, std::move(keep_open));
}

[[noreturn]] void refuse_entry(const std::string& key, const std::string& why, int rank) {
  throw IoError("refusing the store's '" + key + "' (" + why + "): not what a rank of this job writes there",
                ErrorContext{.rank = rank, .op = "init_process_group"});
}

struct PeerSegment {
  std::string path;
  std::size_t ring_bytes = 0;
  std::int64_t pid = 0;  // of the process whose /proc path `path` is (0: not such a path)
};

PeerSegment parse_entry(const std::string& entry, const std::string& key, int rank) {
  std::istringstream fields(entry);
  PeerSegment segment;
  if (!(fields >> segment.path >> segment.ring_bytes) || !std::has_single_bit(segment.ring_bytes) ||
      segment.ring_bytes < kSmallestRingBytes || segment.ring_bytes > kLargestRingBytes) {
    refuse_entry(key, "an entry '" + entry.substr(0, 80) + "'", rank);
  }
  long long pid = 0;
  int descriptor = 0;
  if (std::sscanf(segment.path.c_str(), "/proc/%lld/fd/%d", &pid, &descriptor) == 2) segment.pid = pid;
  return segment;
}

}  // namespace

std::size_t ring_bytes_for(std::size_t budget_bytes, std::size_t peers) {
  if (peers == 0) return kLargestRingBytes;
  if (budget_bytes <= headers_bytes(peers)) return 0;
  std::size_t ring = std::bit_floor(std::min(kLargestRingBytes, (budget_bytes - headers_bytes(peers)) / peers));
  return ring < kSmallestRingBytes ? 0 : ring;
}

std::size_t default_shm_budget(std::size_t ranks_on_host, std::size_t free_bytes) {
  if (ranks_on_host < 2) return kDefaultShmBudgetBytes;
  std::size_t peers = ranks_on_host - 1;
  std::size_t smallest = headers_bytes(peers) + peers * kSmallestRingBytes;
  std::size_t budget = std::min(kDefaultShmBudgetBytes, std::max(kHostRingsBytes / ranks_on_host, smallest));
  // Below the smallest rings the set-up says there is no room, and the host runs over TCP.
  return std::min(budget, free_bytes / ranks_on_host / 2);
}

SharedSegment::~SharedSegment() { ::munmap(base_, bytes_); }

SharedMemoryPairs::SharedMemoryPairs(Store& store, int rank, int size, const std::string& job_id,
                                     const std::vector<bool>& same_host, std::chrono::milliseconds timeout,
                                     const Fail& fail, std::size_t budget_bytes)
    : ends_(size) {
  // A failure is told (`fail`) while own_ still holds this rank's segment: otherwise a peer
  // could find it gone first and name this (live) rank as dead.
  try {
    set_up(store, rank, job_id, same_host, timeout, budget_bytes);
  } catch (const Error& error) {
    if (fail) fail(error);
    throw;
  }
}

void SharedMemoryPairs::set_up(Store& store, int rank, const std::string& job_id, const std::vector<bool>& same_host,
                               std::chrono::milliseconds timeout, std::size_t budget_bytes) {
  std::vector<int> host_ranks;
  for (int peer = 0; peer < static_cast<int>(same_host.size()); ++peer) {
    if (same_host[peer] || peer == rank) host_ranks.push_back(peer);
  }
  if (host_ranks.size() < 2) return;
  std::size_t peers = host_ranks.size() - 1;

  // This rank's receive segment, or why it has none.
  std::string entry;
  std::size_t ring_bytes = ring_bytes_for(budget_bytes, peers);
  std::string name = "/comm-" + job_id.substr(0, 16) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rank);
  if (ring_bytes == 0) {
    entry = kShortage + std::string("rank ") + std::to_string(rank) + "'s budget of " +
            std::to_string(budget_bytes >> 10) + " KiB leaves each of its " + std::to_string(peers) +
            " peers on this host less than " + std::to_string(kSmallestRingBytes >> 10) +
            " KiB of ring (the budget is COMM_SHM_BUDGET_MB where given, else at most half of the rank's share of "
            "what /dev/shm has free): raise it, give /dev/shm more room, or run fewer ranks per host";
  } else {
    auto created = create_segment(name, segment_bytes(peers, ring_bytes));
    if (!created.problem.empty()) {
      entry = kShortage + std::string("rank ") + std::to_string(rank) + ": " + created.problem;
    } else {
      int fd = created.file.get();
      own_ = map_segment(fd, segment_bytes(peers, ring_bytes), 0, name, std::move(created.file));
      entry = created.path + " " + std::to_string(ring_bytes);
    }
  }
  store.set(segment_key(rank), entry);

  // The host's lowest rank gathers every entry into one; everyone reads that one.
  int leader = host_ranks.front();
  std::vector<std::string> entries;
  if (rank == leader) {
    std::string combined;
    for (int peer : host_ranks) {
      if (peer != rank) store.wait({segment_key(peer)}, timeout);
      std::string said = peer == rank ? entry : store.get_string(segment_key(peer));
      if (said.find('\n') != std::string::npos) refuse_entry(segment_key(peer), "a line break", rank);
      combined += said + "\n";
      entries.push_back(std::move(said));
    }
    store.set(host_key(leader), combined);
  } else {
    store.wait({host_key(leader)}, timeout);
    std::istringstream lines(store.get_string(host_key(leader)));
    for (std::string line; std::getline(lines, line);) entries.push_back(line);
    if (entries.size() != host_ranks.size()) {
      refuse_entry(host_key(leader),
                   std::to_string(entries.size()) + " entries for " + std::to_string(host_ranks.size()) + " ranks",
                   rank);
    }
  }
  for (const auto& said : entries) {
    if (!said.empty() && said.front() == kShortage) {
      shortage_ = said.substr(1);
      own_.reset();
      return;
    }
  }

  ring_bytes_ = ring_bytes;
  for (std::size_t index = 0; index < host_ranks.size(); ++index) {
    int peer = host_ranks[index];
    if (peer == rank) continue;
    PeerSegment theirs = parse_entry(entries[index], host_key(leader), rank);
    auto file = open_segment(theirs.path, segment_bytes(peers, theirs.ring_bytes));
    if (!file.valid()) {
      throw PeerClosedError("rank " + std::to_string(peer) +
                                " died while the shared-memory pairs were being set up (its receive segment went "
                                "with it); the other ranks stop here instead of waiting out the timeout",
                            ErrorContext{.rank = rank, .peer = peer, .op = "init_process_group"});
    }
    // Of the peer's segment, only the headers and the ring this rank writes into.
    std::size_t writer_slot = slot_of(host_ranks, peer, rank), reader_slot = slot_of(host_ranks, rank, peer);
    auto headers = map_segment(file.get(), headers_bytes(peers), 0, theirs.path);
    auto data =
        map_segment(file.get(), theirs.ring_bytes, headers_bytes(peers) + writer_slot * theirs.ring_bytes, theirs.path);
    Ring outbound{reinterpret_cast<RingHeader*>(headers->base()) + writer_slot, data->base(), theirs.ring_bytes};
    Ring inbound{reinterpret_cast<RingHeader*>(own_->base()) + reader_slot,
                 own_->base() + headers_bytes(peers) + reader_slot * ring_bytes, ring_bytes};
    ends_[peer] = {{own_, std::move(headers), std::move(data)}, inbound, outbound, theirs.pid};
  }
  log::get(log::Subsystem::Transport)
      .debug("shared memory: rank {} reads {} rings of {} KiB ({} KiB in all; COMM_SHM_BUDGET_MB={})", rank, peers,
             ring_bytes >> 10, segment_bytes(peers, ring_bytes) >> 10, budget_bytes >> 20);
}

ShmPairEnd SharedMemoryPairs::take(int peer) { return std::move(ends_[peer]); }

}  // namespace comm::transport
