// The C API's collectives, point-to-point calls and groups: NCCL's arguments turned into
// libcomm's Buffers and calls. libcomm's collectives work in place; where NCCL's out-of-place
// form has a separate input that libcomm would overwrite (all_reduce, broadcast's root, reduce's
// root), the input is copied to the output first. Every operation is one comm::Call submitted
// one way: outside a group it runs (libcomm's blocking form); in a group, every operation starts
// at the group's end. Device operations too return only when done: libcomm's host drives them
// (handshakes with the peers, then copies and kernels on the stream), so an operation that was
// only handed to the group's queue would have put nothing on the stream yet, and work the caller
// queues on the stream next (torch's event that says the collective is done) would run first.
#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/comm.hpp"
#include "cuda/memory.hpp"
#include "libcomm/c_api/communicator.hpp"
#include "libcomm/c_api/group_calls.hpp"
#include "libcomm/c_api/operation_call.hpp"
#include "libcomm/c_api/results.hpp"

using comm::Buffer;
using comm::Device;
using comm::DType;
using comm::Operation;
using comm::ProcessGroup;
using comm::ReduceOp;
using comm::c_api::Call;
using comm::c_api::CallError;
using comm::c_api::guarded;
using comm::c_api::Issuing;
using comm::c_api::on_device;
using comm::c_api::op_of;
using comm::c_api::require;
using comm::c_api::require_root;
using comm::c_api::Submission;
using comm::c_api::submit;

namespace comm::c_api {

DType dtype_of(comm_datatype_t datatype) {
  switch (datatype) {
    case COMM_INT8: return DType::Int8;
    case COMM_UINT8: return DType::UInt8;
    case COMM_INT32: return DType::Int32;
    case COMM_UINT32: return DType::UInt32;
    case COMM_INT64: return DType::Int64;
    case COMM_UINT64: return DType::UInt64;
    case COMM_FLOAT16: return DType::Float16;
    case COMM_FLOAT32: return DType::Float32;
    case COMM_FLOAT64: return DType::Float64;
    case COMM_BFLOAT16: return DType::BFloat16;
    case COMM_BOOL: return DType::Bool;
  }
  throw CallError(COMM_INVALID_ARGUMENT,
                  "datatype " + std::to_string(static_cast<int>(datatype)) + " is not a comm_datatype_t");
}

ReduceOp op_of(comm_op_t op) {
  switch (op) {
    case COMM_SUM: return ReduceOp::Sum;
    case COMM_PRODUCT: return ReduceOp::Product;
    case COMM_MAX: return ReduceOp::Max;
    case COMM_MIN: return ReduceOp::Min;
    case COMM_AVG: return ReduceOp::Avg;
    case COMM_BAND: return ReduceOp::BAnd;
    case COMM_BOR: return ReduceOp::BOr;
    case COMM_BXOR: return ReduceOp::BXor;
  }
  throw CallError(COMM_INVALID_ARGUMENT, "op " + std::to_string(static_cast<int>(op)) + " is not a comm_op_t");
}

Device device_of(const void* pointer) {
  static const bool gpus = comm::cuda::devices_present();  // asked once: calls look at pointers only with GPUs
  if (pointer == nullptr || !gpus) return {};
  int device = comm::cuda::device_of(pointer);
  return device < 0 ? Device{} : Device{Device::Kind::Cuda, device};
}

// NCCL's out-of-place input, copied to where libcomm works in place (on the call's stream for
// device memory, so that it is ordered before the operation). Nothing to do in place, or where
// there is no input (a broadcast's non-root).
void copy_input(const Buffer& output, const Buffer& input, void* stream) {
  if (output.data == input.data || input.count == 0) return;
  std::size_t bytes = input.count * comm::element_size(input.dtype);
  if (on_device(output.device)) {
    comm::cuda::copy_async(output.data, input.data, bytes, output.device.index, stream);
  } else {
    std::memmove(output.data, input.data, bytes);
  }
}

// Readies an operation on its group when it is issued: the stream for device memory, NCCL's
// separate input copied in, the blocks pointed at where the submission keeps them.
const comm::Call& ready(ProcessGroup& group, bool device, void* stream, Submission& submission) {
  if (device) group.set_cuda_stream(stream);
  if (submission.copied_input) copy_input(submission.call.output, *submission.copied_input, stream);
  submission.call.blocks = submission.blocks;
  submission.call.input_counts = submission.input_counts;
  submission.call.output_counts = submission.output_counts;
  return submission.call;
}

comm_result_t prepare(const Call& arguments, Submission submission);

comm_result_t submit(const Call& arguments, Submission submission) {
  if (arguments.prepared != nullptr) return prepare(arguments, std::move(submission));
  if (comm::c_api::in_group()) {
    comm::c_api::queue_operation(arguments.comm, [device = arguments.device, stream = arguments.stream,
                                                  submission = std::move(submission)](ProcessGroup& group) mutable {
      return group.start(ready(group, device, stream, submission));
    });
    return COMM_SUCCESS;
  }
  auto& group = arguments.comm->group();
  group.run(ready(group, arguments.device, arguments.stream, submission));
  return COMM_SUCCESS;
}

std::vector<Buffer> blocks(Call& call, const void* data, std::size_t count_each, const char* name,
                           const char* count_name) {
  call.times_ranks(count_each, count_name);
  std::vector<Buffer> result;
  auto* bytes = static_cast<const char*>(data);
  for (int r = 0; r < call.size(); ++r) {
    result.push_back(
        call.buffer(bytes ? bytes + call.bytes(count_each) * static_cast<std::size_t>(r) : nullptr, count_each, name));
  }
  return result;
}

void require_root(const Call& call, int root) {
  require(root >= 0 && root < call.size(), COMM_INVALID_ARGUMENT, "root is not a rank of the communicator");
}

// One count per rank from `counts`, and their total, checked so that it cannot wrap around.
std::vector<std::size_t> counts_of(const Call& call, const size_t* counts, const char* name, std::size_t* total) {
  require(counts != nullptr, COMM_INVALID_ARGUMENT, (std::string(name) + " is NULL").c_str());
  std::vector<std::size_t> result(counts, counts + call.size());
  *total = 0;
  for (std::size_t count : result) {
    if (count > Call::kMaxElements - *total) {
      throw CallError(COMM_INVALID_ARGUMENT, std::string(name) + " add up to more elements than memory can hold");
    }
    *total += count;
  }
  return result;
}

}  // namespace comm::c_api

namespace {

using comm::c_api::blocks;

comm_result_t all_reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                              comm_op_t op, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    ReduceOp reduce = op_of(op);
    Buffer input = call.buffer(sendbuff, count, "sendbuff");
    Buffer output = call.buffer(recvbuff, count, "recvbuff");
    return submit(call,
                  {.call = {.operation = Operation::AllReduce, .output = output, .op = reduce}, .copied_input = input});
  });
}

comm_result_t broadcast(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, int root,
                             comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    bool is_root = call.rank() == root;
    Buffer input = call.buffer(is_root ? sendbuff : nullptr, is_root ? count : 0, "sendbuff");
    Buffer output = call.buffer(recvbuff, count, "recvbuff");
    return submit(call,
                  {.call = {.operation = Operation::Broadcast, .output = output, .root = root}, .copied_input = input});
  });
}

comm_result_t reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_op_t op,
                          int root, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    ReduceOp reduce = op_of(op);
    Buffer input = call.buffer(sendbuff, count, "sendbuff");
    // The root reduces into recvbuff; the others lend sendbuff, which libcomm leaves as it was.
    bool is_root = call.rank() == root;
    Buffer output = is_root ? call.buffer(recvbuff, count, "recvbuff") : input;
    return submit(call, {.call = {.operation = Operation::Reduce, .output = output, .op = reduce, .root = root},
                         .copied_input = input});
  });
}

comm_result_t all_gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                              comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    Buffer input = call.buffer(sendbuff, sendcount, "sendbuff");
    Buffer output = call.buffer(recvbuff, call.times_ranks(sendcount, "sendcount"), "recvbuff");
    return submit(call, {.call = {.operation = Operation::AllGather, .output = output, .input = input}});
  });
}

comm_result_t reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype,
                                  comm_op_t op, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    ReduceOp reduce = op_of(op);
    Buffer input = call.buffer(sendbuff, call.times_ranks(recvcount, "recvcount"), "sendbuff");
    Buffer output = call.buffer(recvbuff, recvcount, "recvbuff");
    return submit(call,
                  {.call = {.operation = Operation::ReduceScatter, .output = output, .input = input, .op = reduce}});
  });
}

comm_result_t all_to_all(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_t comm,
                              Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    std::size_t total = call.times_ranks(count, "count");
    Buffer input = call.buffer(sendbuff, total, "sendbuff");
    Buffer output = call.buffer(recvbuff, total, "recvbuff");
    return submit(call, {.call = {.operation = Operation::AllToAll, .output = output, .input = input}});
  });
}

comm_result_t gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype, int root,
                          comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    Buffer input = call.buffer(sendbuff, sendcount, "sendbuff");
    std::vector<Buffer> outputs;
    if (call.rank() == root) outputs = blocks(call, recvbuff, sendcount, "recvbuff", "sendcount");
    return submit(
        call, {.call = {.operation = Operation::Gather, .input = input, .root = root}, .blocks = std::move(outputs)});
  });
}

comm_result_t scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype, int root,
                           comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    Buffer output = call.buffer(recvbuff, recvcount, "recvbuff");
    std::vector<Buffer> inputs;
    if (call.rank() == root) inputs = blocks(call, sendbuff, recvcount, "sendbuff", "recvcount");
    return submit(
        call, {.call = {.operation = Operation::Scatter, .output = output, .root = root}, .blocks = std::move(inputs)});
  });
}

comm_result_t barrier(comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, COMM_UINT8, issue);
    return submit(call, {.call = {.operation = Operation::Barrier}});
  });
}

}  // namespace

// A persistent call of the C API: the operation as a *_init form described it (its blocks and
// NCCL's separate input kept here) and libcomm's PreparedCall on them.
struct comm_prepared {
  comm_t comm;
  bool device;
  Submission submission;
  std::shared_ptr<comm::PreparedCall> call;
};

namespace comm::c_api {

comm_result_t prepare(const Call& arguments, Submission submission) {
  require(!comm::c_api::in_group(), COMM_INVALID_ARGUMENT,
          "a call is prepared outside comm_group_start/end (its runs may be inside one)");
  auto prepared = std::make_unique<comm_prepared>(
      comm_prepared{.comm = arguments.comm, .device = arguments.device,
                    .submission = std::move(submission), .call = nullptr});
  prepared->submission.call.blocks = prepared->submission.blocks;
  prepared->submission.call.input_counts = prepared->submission.input_counts;
  prepared->submission.call.output_counts = prepared->submission.output_counts;
  prepared->call = arguments.comm->group().prepare(prepared->submission.call);
  *arguments.prepared = prepared.release();  // the caller's, until comm_prepared_free
  return COMM_SUCCESS;
}

}  // namespace comm::c_api

extern "C" {

comm_result_t comm_all_reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                              comm_op_t op, comm_t comm, void* stream) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, {"comm_all_reduce", stream});
}

comm_result_t comm_all_reduce_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype,
                              comm_op_t op, comm_t comm, comm_prepared_t* prepared) {
  return all_reduce(sendbuff, recvbuff, count, datatype, op, comm, {"comm_all_reduce_init", nullptr, true, prepared});
}

comm_result_t comm_broadcast(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, int root,
                             comm_t comm, void* stream) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, {"comm_broadcast", stream});
}

comm_result_t comm_broadcast_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, int root,
                             comm_t comm, comm_prepared_t* prepared) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, {"comm_broadcast_init", nullptr, true, prepared});
}

comm_result_t comm_reduce(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_op_t op,
                          int root, comm_t comm, void* stream) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, {"comm_reduce", stream});
}

comm_result_t comm_reduce_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_op_t op,
                          int root, comm_t comm, comm_prepared_t* prepared) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, {"comm_reduce_init", nullptr, true, prepared});
}

comm_result_t comm_all_gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                              comm_t comm, void* stream) {
  return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, {"comm_all_gather", stream});
}

comm_result_t comm_all_gather_init(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype,
                              comm_t comm, comm_prepared_t* prepared) {
  return all_gather(sendbuff, recvbuff, sendcount, datatype, comm, {"comm_all_gather_init", nullptr, true, prepared});
}

comm_result_t comm_reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype,
                                  comm_op_t op, comm_t comm, void* stream) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, {"comm_reduce_scatter", stream});
}

comm_result_t comm_reduce_scatter_init(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype,
                                  comm_op_t op, comm_t comm, comm_prepared_t* prepared) {
  return reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, {"comm_reduce_scatter_init", nullptr, true, prepared});
}

comm_result_t comm_all_to_all(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_t comm,
                              void* stream) {
  return all_to_all(sendbuff, recvbuff, count, datatype, comm, {"comm_all_to_all", stream});
}

comm_result_t comm_all_to_all_init(const void* sendbuff, void* recvbuff, size_t count, comm_datatype_t datatype, comm_t comm,
                              comm_prepared_t* prepared) {
  return all_to_all(sendbuff, recvbuff, count, datatype, comm, {"comm_all_to_all_init", nullptr, true, prepared});
}

comm_result_t comm_gather(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype, int root,
                          comm_t comm, void* stream) {
  return gather(sendbuff, recvbuff, sendcount, datatype, root, comm, {"comm_gather", stream});
}

comm_result_t comm_gather_init(const void* sendbuff, void* recvbuff, size_t sendcount, comm_datatype_t datatype, int root,
                          comm_t comm, comm_prepared_t* prepared) {
  return gather(sendbuff, recvbuff, sendcount, datatype, root, comm, {"comm_gather_init", nullptr, true, prepared});
}

comm_result_t comm_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype, int root,
                           comm_t comm, void* stream) {
  return scatter(sendbuff, recvbuff, recvcount, datatype, root, comm, {"comm_scatter", stream});
}

comm_result_t comm_scatter_init(const void* sendbuff, void* recvbuff, size_t recvcount, comm_datatype_t datatype, int root,
                           comm_t comm, comm_prepared_t* prepared) {
  return scatter(sendbuff, recvbuff, recvcount, datatype, root, comm, {"comm_scatter_init", nullptr, true, prepared});
}

comm_result_t comm_barrier(comm_t comm, void* stream) {
  return barrier(comm, {"comm_barrier", stream});
}

comm_result_t comm_barrier_init(comm_t comm, comm_prepared_t* prepared) {
  return barrier(comm, {"comm_barrier_init", nullptr, true, prepared});
}

comm_result_t comm_send(const void* sendbuff, size_t count, comm_datatype_t datatype, int peer, comm_t comm,
                        void* stream) {
  return guarded(comm, "comm_send", [&] {
    Call call(comm, datatype, {"comm_send", stream});
    Buffer input = call.buffer(sendbuff, count, "sendbuff");
    return submit(call, {.call = {.operation = Operation::Send, .input = input, .root = peer}});
  });
}

comm_result_t comm_recv(void* recvbuff, size_t count, comm_datatype_t datatype, int peer, comm_t comm, void* stream) {
  return guarded(comm, "comm_recv", [&] {
    Call call(comm, datatype, {"comm_recv", stream});
    require(peer >= 0, COMM_INVALID_ARGUMENT, "peer must be a rank of the communicator (there is no any-source)");
    Buffer output = call.buffer(recvbuff, count, "recvbuff");
    return submit(call, {.call = {.operation = Operation::Recv, .output = output, .root = peer}});
  });
}

comm_result_t comm_prepared_run(comm_prepared_t prepared, void* stream) {
  return guarded(prepared != nullptr ? prepared->comm : nullptr, "comm_prepared_run", [&] {
    require(prepared != nullptr, COMM_INVALID_ARGUMENT, "prepared is NULL");
    if (comm::c_api::in_group()) {
      comm::c_api::queue_operation(prepared->comm, [prepared, stream](ProcessGroup& group) {
        comm::c_api::ready(group, prepared->device, stream, prepared->submission);
        return prepared->call->start();
      });
      return COMM_SUCCESS;
    }
    comm::c_api::ready(prepared->comm->group(), prepared->device, stream, prepared->submission);
    prepared->call->run();
    return COMM_SUCCESS;
  });
}

comm_result_t comm_prepared_free(comm_prepared_t prepared) {
  std::unique_ptr<comm_prepared> owned(prepared);  // NULL: nothing to do
  return COMM_SUCCESS;
}

comm_result_t comm_group_start(void) { return comm::c_api::group_start(); }

comm_result_t comm_group_end(void) { return comm::c_api::group_end(); }

}  // extern "C"
