// The C API's uneven collectives (MPI's v-forms without displacements): one count per rank,
// blocks packed in rank order; what MPI leaves to the root (recvcounts of Gatherv, sendcounts of
// Scatterv) every rank passes here, so that a disagreement is a mismatch on every rank.
#include <vector>

#include "comm/comm.h"
#include "libcomm/c_api/operation_call.hpp"

using comm::Buffer;
using comm::Operation;
using comm::ReduceOp;
using comm::c_api::Call;
using comm::c_api::counts_of;
using comm::c_api::guarded;
using comm::c_api::Issuing;
using comm::c_api::op_of;
using comm::c_api::require_root;
using comm::c_api::submit;

namespace {

comm_result_t all_to_all_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff, const size_t* recvcounts,
                           comm_datatype_t datatype, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    std::size_t sent = 0, received = 0;
    auto input_counts = counts_of(call, sendcounts, "sendcounts", &sent);
    auto output_counts = counts_of(call, recvcounts, "recvcounts", &received);
    Buffer input = call.buffer(sendbuff, sent, "sendbuff");
    Buffer output = call.buffer(recvbuff, received, "recvbuff");
    return submit(call, {.call = {.operation = Operation::AllToAllV, .output = output, .input = input},
                         .input_counts = std::move(input_counts),
                         .output_counts = std::move(output_counts)});
  });
}

comm_result_t all_gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                           comm_datatype_t datatype, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    std::size_t received = 0;
    auto counts = counts_of(call, recvcounts, "recvcounts", &received);
    Buffer input = call.buffer(sendbuff, sendcount, "sendbuff");
    Buffer output = call.buffer(recvbuff, received, "recvbuff");
    return submit(call, {.call = {.operation = Operation::AllGatherV, .output = output, .input = input},
                         .output_counts = std::move(counts)});
  });
}

comm_result_t reduce_scatter_v(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                               comm_datatype_t datatype, comm_op_t op, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    ReduceOp reduce = op_of(op);
    std::size_t total = 0;
    auto counts = counts_of(call, recvcounts, "recvcounts", &total);
    Buffer input = call.buffer(sendbuff, total, "sendbuff");
    Buffer output = call.buffer(recvbuff, counts[static_cast<std::size_t>(call.rank())], "recvbuff");
    return submit(
        call, {.call = {.operation = Operation::ReduceScatterV, .output = output, .input = input, .op = reduce},
               .input_counts = std::move(counts)});
  });
}

// MPI's recvbuff is the root's only: elsewhere it may be NULL.
comm_result_t gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                       comm_datatype_t datatype, int root, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    std::size_t total = 0;
    auto counts = counts_of(call, recvcounts, "recvcounts", &total);
    bool is_root = call.rank() == root;
    Buffer input = call.buffer(sendbuff, sendcount, "sendbuff");
    Buffer output = call.buffer(is_root ? recvbuff : nullptr, is_root ? total : 0, "recvbuff");
    return submit(
        call, {.call = {.operation = Operation::GatherV, .output = output, .input = input, .root = root},
               .output_counts = std::move(counts)});
  });
}

// MPI's sendbuff is the root's only: elsewhere it may be NULL.
comm_result_t scatter_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff, size_t recvcount,
                        comm_datatype_t datatype, int root, comm_t comm, Issuing issue) {
  return guarded(comm, issue.name, [&] {
    Call call(comm, datatype, issue);
    require_root(call, root);
    std::size_t total = 0;
    auto counts = counts_of(call, sendcounts, "sendcounts", &total);
    bool is_root = call.rank() == root;
    Buffer input = call.buffer(is_root ? sendbuff : nullptr, is_root ? total : 0, "sendbuff");
    Buffer output = call.buffer(recvbuff, recvcount, "recvbuff");
    return submit(
        call, {.call = {.operation = Operation::ScatterV, .output = output, .input = input, .root = root},
               .input_counts = std::move(counts)});
  });
}

}  // namespace

extern "C" {

comm_result_t comm_reduce_scatter_v(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                    comm_datatype_t datatype, comm_op_t op, comm_t comm, void* stream) {
  return reduce_scatter_v(sendbuff, recvbuff, recvcounts, datatype, op, comm, {"comm_reduce_scatter_v", stream});
}

comm_result_t comm_gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                            comm_datatype_t datatype, int root, comm_t comm, void* stream) {
  return gather_v(sendbuff, sendcount, recvbuff, recvcounts, datatype, root, comm, {"comm_gather_v", stream});
}

comm_result_t comm_scatter_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff, size_t recvcount,
                             comm_datatype_t datatype, int root, comm_t comm, void* stream) {
  return scatter_v(sendbuff, sendcounts, recvbuff, recvcount, datatype, root, comm, {"comm_scatter_v", stream});
}

comm_result_t comm_all_to_all_v(const void* sendbuff, const size_t* sendcounts, void* recvbuff,
                                const size_t* recvcounts, comm_datatype_t datatype, comm_t comm, void* stream) {
  return all_to_all_v(sendbuff, sendcounts, recvbuff, recvcounts, datatype, comm, {"comm_all_to_all_v", stream});
}

comm_result_t comm_all_gather_v(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                comm_datatype_t datatype, comm_t comm, void* stream) {
  return all_gather_v(sendbuff, sendcount, recvbuff, recvcounts, datatype, comm, {"comm_all_gather_v", stream});
}

/* The persistent forms (comm/comm.h): the same arguments, prepared once. */
comm_result_t comm_all_to_all_v_init(const void* sendbuff, const size_t* sendcounts, void* recvbuff,
                                     const size_t* recvcounts, comm_datatype_t datatype, comm_t comm,
                                     comm_prepared_t* prepared) {
  return all_to_all_v(sendbuff, sendcounts, recvbuff, recvcounts, datatype, comm,
                      {"comm_all_to_all_v_init", nullptr, true, prepared});
}

comm_result_t comm_all_gather_v_init(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                     comm_datatype_t datatype, comm_t comm, comm_prepared_t* prepared) {
  return all_gather_v(sendbuff, sendcount, recvbuff, recvcounts, datatype, comm,
                      {"comm_all_gather_v_init", nullptr, true, prepared});
}

comm_result_t comm_reduce_scatter_v_init(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                         comm_datatype_t datatype, comm_op_t op, comm_t comm,
                                         comm_prepared_t* prepared) {
  return reduce_scatter_v(sendbuff, recvbuff, recvcounts, datatype, op, comm,
                          {"comm_reduce_scatter_v_init", nullptr, true, prepared});
}

comm_result_t comm_gather_v_init(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                 comm_datatype_t datatype, int root, comm_t comm, comm_prepared_t* prepared) {
  return gather_v(sendbuff, sendcount, recvbuff, recvcounts, datatype, root, comm,
                  {"comm_gather_v_init", nullptr, true, prepared});
}

comm_result_t comm_scatter_v_init(const void* sendbuff, const size_t* sendcounts, void* recvbuff, size_t recvcount,
                                  comm_datatype_t datatype, int root, comm_t comm, comm_prepared_t* prepared) {
  return scatter_v(sendbuff, sendcounts, recvbuff, recvcount, datatype, root, comm,
                   {"comm_scatter_v_init", nullptr, true, prepared});
}

}  // extern "C"
