// Every check of a caller's arguments, made on the calling rank before a call starts: a wrong
// argument is an InvalidArgumentError that says what is wrong and what to pass instead, and
// nothing has been sent or posted. A checked collective comes out as the HostCall descriptor its
// algorithms take (on host and GPU buffers alike).
#pragma once

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
  // send's or recv's, on host buffers.
  void send(const Buffer& buffer, int dst, int tag) const;
  void recv(const Buffer& buffer, int src, int tag) const;
  // A GPU send's or recv's peer and tag; `staged`: the transfer is staged through host memory,
  // which lets a receive name kAnySource. The buffer is checked first (check_buffer()).
  void gpu_transfer(int peer, int tag, bool receiving, bool staged) const;
  void check_buffer(const Buffer& buffer, const char* op) const;
  void check_member(const char* op) const;

 private:
  void check_peer(int peer, const char* op, bool any_source_allowed) const;
  void check_tag(int tag, const char* op) const;
  void check_root(int root, const char* op) const;
  // An input and an output of one call: one dtype, one device.
  void check_pair(const Buffer& output, const Buffer& input, const char* op) const;
  // Both buffers usable, and a pair.
  void check_pair_buffers(const Buffer& output, const Buffer& input, const char* op) const;
  void check_count(bool ok, const char* op, const std::string& message) const;
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
