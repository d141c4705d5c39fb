// Every check of a caller's arguments, made on the calling rank before a call starts: a wrong
// argument is an InvalidArgumentError that says what is wrong and what to pass instead, and
// nothing has been sent or posted. A checked collective comes out as the HostCall descriptor its
// algorithms take (on host and GPU buffers alike).
#pragma once

#include <bit>
#include <span>
#include <string>
#include <utility>

#include "algorithms/algorithm_table.hpp"
#include "comm/call.hpp"
#include "comm/types.hpp"

namespace comm {

// Where a collective's buffers live (all of them: the checks see to it): its output, or the
// input of a call whose outputs are blocks.
Device device_of(const Call& call);

class CallChecks {
 public:
  // `world_group`: the group numbers its ranks as the transport does (any-source receives).
  CallChecks(int rank, int size, std::string group_name, bool world_group)
      : rank_(rank), size_(size), group_name_(std::move(group_name)), world_group_(world_group) {}

  // A collective's arguments, checked, as its algorithms take them.
  algorithms::HostCall collective(const Call& call) const;
  // send's or recv's, on host buffers: the common case decided inline, the rest (and every
  // error message) out of line.
  void send(const Buffer& buffer, int dst, int tag) const {
    if (!plain_transfer(buffer, dst, tag)) [[unlikely]]
      check_send(buffer, dst, tag);
  }
  void recv(const Buffer& buffer, int src, int tag) const {
    if (!plain_transfer(buffer, src, tag)) [[unlikely]]
      check_recv(buffer, src, tag);
  }
  // A GPU send's or recv's peer and tag; `staged`: the transfer is staged through host memory,
  // which lets a receive name kAnySource. The buffer is checked first (check_buffer()).
  void gpu_transfer(int peer, int tag, bool receiving, bool staged) const;
  void check_buffer(const Buffer& buffer, const char* op) const;
  void check_member(const char* op) const;

 private:
  // A member's transfer of a well-formed host buffer with a named peer of the group and a valid
  // tag: what every check below would pass (false may still pass them: kAnySource, say).
  bool plain_transfer(const Buffer& buffer, int peer, int tag) const {
    std::size_t element = element_size(buffer.dtype);
    if (element == 0) return false;
    // The count's bytes must not run past the end of the address space (sizes are powers of two).
    auto room = (~std::uintptr_t{0} - reinterpret_cast<std::uintptr_t>(buffer.data)) >> std::countr_zero(element);
    // Evaluated whole, without a branch each (a member's rank and the tag both >= 0; the peer in
    // [0, size) as one unsigned comparison): every message passes here.
    bool plain = ((rank_ | tag) >= 0) & (static_cast<unsigned>(peer) < static_cast<unsigned>(size_)) &
                 (buffer.count <= room) & (buffer.device.kind == Device::Kind::Cpu);
    return plain && (buffer.count == 0 || (buffer.data != nullptr && !gpus_present()));
  }
  // Asked of CUDA once (a call into the CUDA library per message cost as much as the check).
  static bool gpus_present() {
    static const bool present = ask_gpus_present();
    return present;
  }
  static bool ask_gpus_present();
  void check_send(const Buffer& buffer, int dst, int tag) const;
  void check_recv(const Buffer& buffer, int src, int tag) const;
  void check_peer(int peer, const char* op, bool any_source_allowed) const;
  void check_tag(int tag, const char* op) const;
  void check_root(int root, const char* op) const;
  // An input and an output of one call: one dtype, one device.
  void check_pair(const Buffer& output, const Buffer& input, const char* op) const;
  // Both buffers usable, and a pair.
  void check_pair_buffers(const Buffer& output, const Buffer& input, const char* op) const;
  void check_count(bool ok, const char* op, const std::string& message) const;
  // A v-form's counts: one per rank, their sum within the buffer's count; returns the sum.
  std::size_t total_of(std::span<const std::size_t> counts, const char* name, std::size_t buffer_count,
                       const char* op) const;
  // This rank's entry of counts (already checked by total_of), which `buffer` must hold.
  std::size_t own_count(std::span<const std::size_t> counts, const Buffer& buffer, const char* name,
                        const char* op) const;
  // gather's outputs or scatter's inputs on the root, all_gather's outputs: one per rank, each
  // paired with `own` (the rank's own buffer) and holding `own.count` elements (at least, for
  // outputs).
  void check_blocks(std::span<const Buffer> blocks, const Buffer& own, bool outputs, const char* op) const;

  int rank_;
  int size_;
  std::string group_name_;
  bool world_group_;
};

}  // namespace comm
