// What every operation of the C API shares (operations.cpp, uneven_operations.cpp): its
// arguments checked once (Call), how it is issued (Issuing), and the one path that submits it.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/comm.hpp"
#include "libcomm/c_api/communicator.hpp"
#include "libcomm/c_api/results.hpp"

namespace comm::c_api {

// One operation as libcomm's Call, with what it needs kept with it: the blocks its Call points
// at, and NCCL's separate input where libcomm works in place.
struct Submission {
  comm::Call call;
  std::vector<Buffer> blocks{};
  std::optional<Buffer> copied_input{};  // copied into call.output first
  std::vector<std::size_t> input_counts{}, output_counts{};  // the uneven forms', which its Call points at
};

DType dtype_of(comm_datatype_t datatype);
ReduceOp op_of(comm_op_t op);
// The device `pointer`'s memory is on (host memory: the default Device).
Device device_of(const void* pointer);
inline bool on_device(Device device) { return device.kind == Device::Kind::Cuda; }

// How an operation is issued: now (or at its group's end) on `stream`, or prepared into a
// persistent call that comm_prepared_run runs (the *_init forms).
struct Issuing {
  const char* name;
  void* stream = nullptr;
  bool prepare = false;
  comm_prepared_t* prepared = nullptr;  // where a prepared call goes
};

// The operation's arguments, checked once, with where its memory is.
struct Call {
  comm_t comm;
  DType dtype;
  void* stream;
  comm_prepared_t* prepared;  // where a *_init form's persistent call goes; null: issued now
  bool device = false;        // its buffers are GPU memory (all of them: a mix is refused)
  bool any_buffer = false;

  Call(comm_t comm, comm_datatype_t datatype, Issuing issue)
      : comm(comm), dtype(dtype_of(datatype)), stream(issue.stream), prepared(issue.prepared) {
    require(comm != nullptr, COMM_INVALID_ARGUMENT, "comm is NULL");
    require(!issue.prepare || prepared != nullptr, COMM_INVALID_ARGUMENT, "prepared is NULL");
  }

  // `count` elements at `data`, which may be NULL only when count is 0.
  Buffer buffer(const void* data, std::size_t count, const char* name) {
    // No element is wider than 8 bytes: one shift instead of a division on every call.
    if (count > kMaxElements) [[unlikely]] {
      throw CallError(COMM_INVALID_ARGUMENT, "the count of " + std::string(name) + " (" + std::to_string(count) +
                                                 ") is too large: more elements than memory can hold");
    }
    if (count > 0 && data == nullptr) throw CallError(COMM_INVALID_ARGUMENT, std::string(name) + " is NULL");
    Device where = count > 0 ? device_of(data) : Device{};
    if (count > 0) {
      require(!any_buffer || on_device(where) == device, COMM_INVALID_ARGUMENT,
              "the buffers must all be host memory or all device memory");
      device = on_device(where);
      any_buffer = true;
    }
    return Buffer(const_cast<void*>(data), count, dtype, where);
  }

  std::size_t bytes(std::size_t count) const { return count * comm::element_size(dtype); }

  // `count` elements for each rank of the communicator, checked so that the total cannot wrap
  // around (a wrapped total would pass every later check and move nothing).
  std::size_t times_ranks(std::size_t count, const char* argument) const {
    auto ranks = static_cast<std::size_t>(size());
    if (count > kMaxElements / ranks) [[unlikely]] {
      throw CallError(COMM_INVALID_ARGUMENT, std::string(argument) + " (" + std::to_string(count) + ") times the " +
                                                 std::to_string(ranks) +
                                                 " ranks is more elements than memory can hold");
    }
    return count * ranks;
  }

  static constexpr std::size_t kMaxElements = std::numeric_limits<std::size_t>::max() >> 3;

  int size() const { return comm->size; }
  int rank() const { return comm->rank; }
};


// Every operation's one path: queued inside a group, else run now (libcomm's blocking form);
// or, from a *_init form, prepared.
comm_result_t submit(const Call& arguments, Submission submission);
void require_root(const Call& call, int root);
// One count per rank from `counts`, and their total, checked so that it cannot wrap around.
std::vector<std::size_t> counts_of(const Call& call, const size_t* counts, const char* name, std::size_t* total);

}  // namespace comm::c_api
