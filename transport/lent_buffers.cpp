#include "transport/lent_buffers.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <bit>
#include <cerrno>

namespace comm::transport {
namespace {

enum LeaseState : std::uint64_t { kFree = 0, kOffered = 1, kTaken = 2, kWithdrawn = 3 };
constexpr std::uint32_t kSlotBits = 4;  // 16 slots
static_assert(LentSlots::kSlots == 1u << kSlotBits);
constexpr std::uint32_t kGenerations = 1u << (32 - kSlotBits);

std::uint64_t word(std::uint32_t generation, LeaseState state) { return std::uint64_t{generation} << 2 | state; }

}  // namespace

int read_other_process(std::int64_t owner, std::uint64_t address, void* into, std::size_t bytes) {
  auto* target = static_cast<std::uint8_t*>(into);
  std::size_t done = 0;
  while (done < bytes) {  // the kernel may stop short (a large read, a signal)
    iovec local{target + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address + done)), bytes - done};
    ssize_t n = ::process_vm_readv(static_cast<pid_t>(owner), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EFAULT;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

LentBuffers::LentBuffers(LentSlots* mine, LentSlots* theirs, ReadLent read, std::int64_t peer)
    : mine_(mine), theirs_(theirs), read_(read), peer_(peer) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    settle();
    lent_ = other.lent_;
    id_ = other.id_;
    other.lent_ = nullptr;
  }
  return *this;
}

bool Lease::settle() {
  if (lent_ == nullptr) return false;
  LentBuffers* lent = lent_;
  lent_ = nullptr;
  return lent->settle(id_);
}

Lease LentBuffers::offer(const void* data, std::size_t bytes) {
  if (used_ == (1u << LentSlots::kSlots) - 1 || mine_->unreadable.load(std::memory_order_relaxed) != 0) return {};
  std::uint32_t index = static_cast<std::uint32_t>(std::countr_one(used_));
  generation_ = generation_ + 1 == kGenerations ? 1 : generation_ + 1;
  LentSlot& slot = mine_->slot[index];
  slot.address.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_relaxed);
  slot.bytes.store(bytes, std::memory_order_relaxed);
  slot.owner.store(::getpid(), std::memory_order_relaxed);
  // Release: a reader that sees the lease sees its fields (it reads them after the state).
  slot.state.store(word(generation_, kOffered), std::memory_order_release);
  used_ |= 1u << index;
  return Lease(this, generation_ << kSlotBits | index);
}

bool LentBuffers::settle(std::uint32_t lease) {
  std::uint32_t index = lease & (LentSlots::kSlots - 1), generation = lease >> kSlotBits;
  LentSlot& slot = mine_->slot[index];
  std::uint64_t expected = word(generation, kOffered);
  bool withdrawn = slot.state.compare_exchange_strong(expected, word(generation, kWithdrawn), std::memory_order_acq_rel);
  used_ &= ~(1u << index);
  return !withdrawn && expected == word(generation, kTaken);
}

LentBuffers::Fetch LentBuffers::fetch(std::uint32_t lease, void* into, std::size_t bytes) {
  std::uint32_t index = lease & (LentSlots::kSlots - 1), generation = lease >> kSlotBits;
  LentSlot& slot = theirs_->slot[index];
  std::uint64_t offered = word(generation, kOffered);
  if (slot.state.load(std::memory_order_acquire) != offered) return Fetch::Withdrawn;
  // Fields read after the state: if the owner reused the slot meanwhile, the swap below fails.
  std::uint64_t address = slot.address.load(std::memory_order_relaxed);
  std::int64_t owner = slot.owner.load(std::memory_order_relaxed);
  if (bytes > slot.bytes.load(std::memory_order_relaxed)) return Fetch::Unable;  // never lent that much: let the two-copy path say so
  if (peer_ != 0 && owner != peer_) return Fetch::Unable;  // not the peer's own memory: never read
  if (bytes > 0 && read_(owner, address, into, bytes) != 0) {
    // Not permitted (ptrace rules, a seccomp filter) or gone: tell the owner to stop lending,
    // unless it withdrew meanwhile (then the failure was the withdrawal's).
    if (slot.state.load(std::memory_order_acquire) != offered) return Fetch::Withdrawn;
    theirs_->unreadable.store(1, std::memory_order_relaxed);
    return Fetch::Unable;
  }
  return slot.state.compare_exchange_strong(offered, word(generation, kTaken), std::memory_order_acq_rel)
             ? Fetch::Done
             : Fetch::Withdrawn;
}

}  // namespace comm::transport
