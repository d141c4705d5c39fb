// Large messages in one copy between processes of one host: the sender lends its buffer and the
// receiver reads it straight into its own (Linux's process_vm_readv, "cross-memory attach"),
// where the ring carried every byte twice (copied in by the sender, out by the receiver). What
// travels on the stream is only the announcement (ReadyToSend with a lease) and the answer
// (Fetched, or ClearToSend when the receiver could not read: the two-copy path then).
//
// The danger of single copy is memory the other side may still touch: a send that fails
// (revoked, aborted, its peer lost) returns its buffer to the caller, who may change it while
// the receiver reads. A lease settles that race in shared memory. Its slot holds the buffer's
// address and a state word: Offered, then Taken by the reader's compare-and-swap *after* its
// read, or Withdrawn by the owner's before letting the buffer go. Exactly one wins: a reader
// that loses throws what it read away (its receive fails with the sender's reason, which
// follows on the stream); an owner that loses knows the read finished. A generation in the
// word keeps a reused slot from being mistaken for an older lease.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace comm::transport {

// Lives in memory both ends map; one table per direction, written by its owner (the sender).
// The fields are atomics (relaxed) because a reader may read them while the owner reuses the
// slot; the state's generation then voids what it read.
struct LentSlot {
  std::atomic<std::uint64_t> state{0};  // generation << 2 | LeaseState
  std::atomic<std::uint64_t> address{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::int64_t> owner{0};  // the lending process (its pid)
};
struct alignas(64) LentSlots {
  static constexpr std::uint32_t kSlots = 16;  // leases out at once to one peer; more take two copies
  LentSlot slot[kSlots];
  std::atomic<std::uint32_t> unreadable{0};  // the reader could not read the owner's memory: stop lending
};

// Reads `bytes` at `address` of process `owner` into `into`; 0 or an errno.
using ReadLent = int (*)(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes);
// process_vm_readv, in pieces until done.
int read_other_process(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes);

class LentBuffers;

// A lease as its owner holds it: ended (LentBuffers::settle) when dropped, if not before. Where
// a send fails, settle it before failing the send: the caller may reuse the buffer at once.
class Lease {
 public:
  Lease() = default;
  Lease(LentBuffers* lent, std::uint32_t id) : lent_(id != 0 ? lent : nullptr), id_(id) {}
  Lease(Lease&& other) noexcept : lent_(other.lent_), id_(other.id_) { other.lent_ = nullptr; }
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { settle(); }
  // What the announcement carries (0: nothing lent, or settled).
  std::uint32_t id() const { return lent_ != nullptr ? id_ : 0; }
  // Ends it now: true when the peer read the buffer whole.
  bool settle();

 private:
  LentBuffers* lent_ = nullptr;
  std::uint32_t id_ = 0;
};

// One end's use of a pair's two tables: `mine` (what it lends) and `theirs` (what its peer
// lends). Used under the message layer's lock; the tables themselves are shared with the peer.
class LentBuffers {
 public:
  // `peer`: the peer's process as this end knows it (from the pair's set-up); a lease naming
  // another is not read (0: whatever the lease names).
  LentBuffers(LentSlots* mine, LentSlots* theirs, ReadLent read, std::int64_t peer = 0);

  // Lends [data, data + bytes): a lease for the announcement, or none (id 0) when no slot is
  // free or the peer cannot read this process.
  Lease offer(const void* data, std::size_t bytes);
  // The owner ends a lease, whatever happened to it (the peer said Fetched or ClearToSend, or
  // the send failed): true when the peer read the buffer whole, false when it never will. The
  // buffer is the caller's again either way.
  bool settle(std::uint32_t lease);

  // The reader: the peer's lease read into `into` (`bytes` of it, at most what was lent).
  enum class Fetch {
    Done,       // read whole; the owner learns it from the lease (and the caller's Fetched frame)
    Withdrawn,  // the owner took it back (its send failed): what was read is void
    Unable,     // this process cannot read the owner's memory: take the two-copy path
  };
  Fetch fetch(std::uint32_t lease, void* into, std::size_t bytes);

 private:
  LentSlots* mine_;
  LentSlots* theirs_;
  ReadLent read_;
  std::int64_t peer_;
  std::uint32_t used_ = 0;        // slots of `mine` leased now (a bit each)
  std::uint32_t generation_ = 0;  // of the last lease made
};

}  // namespace comm::transport
