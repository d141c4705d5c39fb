// libcomm's drop-in libnccl.so.2: NCCL's functions over libcomm's C API. The numbering of
// results, datatypes and operators is NCCL's in both, so most calls forward with a cast; what
// NCCL lacks (bool, bitwise operators) is refused here, and what libcomm lacks (operators made at
// run time) is refused with a message that ncclGetLastError returns.
#include "nccl.h"

#include <comm/comm.h>

#include <string>

namespace {

comm_t to_comm(ncclComm_t comm) { return reinterpret_cast<comm_t>(comm); }

// This library's own refusals, and whether the thread's latest failure was one of them.
thread_local std::string own_error;
thread_local bool own_error_is_latest = false;

ncclResult_t forwarded(comm_result_t result) {
  if (result != COMM_SUCCESS && result != COMM_IN_PROGRESS) own_error_is_latest = false;
  return static_cast<ncclResult_t>(result);
}

// ncclInvalidArgument for arguments NCCL would take but libcomm does not; ncclInvalidUsage for
// calls of later NCCLs that libcomm has no counterpart for.
ncclResult_t refuse(const char* operation, const char* why, ncclResult_t result = ncclInvalidArgument) noexcept {
  try {
    own_error = std::string(operation) + ": " + why;
    own_error_is_latest = true;
  } catch (...) {  // no memory for the message: the code says enough
  }
  return result;
}

bool known_datatype(ncclDataType_t datatype) { return datatype >= ncclInt8 && datatype < ncclNumTypes; }
bool known_op(ncclRedOp_t op) { return op >= ncclSum && op < ncclNumOps; }

const char* kUnknownDatatype = "datatype is not an ncclDataType_t of NCCL 2.19 (0 to ncclNumTypes - 1)";
const char* kUnknownOp =
    "op is not one of ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg (libcomm makes no operators at run time)";

// NCCL's config: only `blocking` has a counterpart; the rest tunes NCCL's kernels.
ncclResult_t read_config(const ncclConfig_t* config, comm_config_t& out, const char* operation) {
  out = comm_config_t COMM_CONFIG_INITIALIZER;
  if (!config) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize)) {
    return refuse(operation, "config was not made from NCCL_CONFIG_INITIALIZER");
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) out.blocking = config->blocking;
  return ncclSuccess;
}

void clear(void** out) {
  if (out != nullptr) *out = nullptr;
}
const char* kNoWindows = "one-sided calls on windows are not offered by libcomm's drop-in (it registers no window)";

}  // namespace

extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) { return forwarded(comm_mem_alloc(ptr, size)); }
ncclResult_t ncclMemFree(void* ptr) { return forwarded(comm_mem_free(ptr)); }

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return refuse("ncclGetVersion", "version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  static_assert(sizeof(ncclUniqueId) == sizeof(comm_unique_id));
  return forwarded(comm_get_unique_id(reinterpret_cast<comm_unique_id*>(uniqueId)));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  comm_config_t settings;
  if (ncclResult_t refused = read_config(config, settings, "ncclCommInitRankConfig")) return refused;
  comm_unique_id id;
  static_assert(sizeof id == sizeof commId);
  __builtin_memcpy(&id, &commId, sizeof id);
  return forwarded(comm_init_rank_config(reinterpret_cast<comm_t*>(comm), nranks, id, rank, &settings));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

// NCCL spreads its bootstrap over several ids; libcomm's store needs one, and every rank has the first.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) return refuse("ncclCommInitRankScalable", "needs at least one id (nId >= 1)");
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  return refuse("ncclCommWindowRegister",
                "symmetric-memory windows are not offered by libcomm's drop-in; leave symmetric memory off",
                ncclInvalidUsage);
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return refuse("ncclCommWindowDeregister", "no window was ever registered (libcomm's drop-in offers none)",
                ncclInvalidUsage);
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  return refuse("ncclGroupSimulateEnd", "libcomm's drop-in does not estimate a group's time; call ncclGroupEnd",
                ncclInvalidUsage);
}

ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*) {
  return refuse("ncclDevCommCreate",
                "NCCL's device API (kernels that reach peers themselves) is not offered by libcomm's drop-in; "
                "use the host collectives",
                ncclInvalidUsage);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm_t*) {
  return refuse("ncclDevCommDestroy", "no device communicator was ever made (libcomm's drop-in offers none)",
                ncclInvalidUsage);
}

// NCCL 2.29's calls: nothing of them exists here (no suspended state, no statistics, no windows).
ncclResult_t ncclCommSuspend(ncclComm_t, int) {
  return refuse("ncclCommSuspend", "libcomm's drop-in does not suspend a communicator; destroy it instead",
                ncclInvalidUsage);
}
ncclResult_t ncclCommResume(ncclComm_t) {
  return refuse("ncclCommResume", "no communicator is ever suspended (libcomm's drop-in offers no suspend)",
                ncclInvalidUsage);
}
ncclResult_t ncclCommMemStats(ncclComm_t, ncclCommMemStat_t, uint64_t*) {
  return refuse("ncclCommMemStats", "libcomm's drop-in keeps no memory statistics", ncclInvalidUsage);
}
ncclResult_t ncclWinGetUserPtr(ncclComm_t, ncclWindow_t, void** outUserPtr) {
  clear(outUserPtr);
  return refuse("ncclWinGetUserPtr", kNoWindows, ncclInvalidUsage);
}
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void** outPtr) {
  clear(outPtr);
  return refuse("ncclGetLsaMultimemDevicePointer", kNoWindows, ncclInvalidUsage);
}
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void** outPtr) {
  clear(outPtr);
  return refuse("ncclGetPeerDevicePointer", kNoWindows, ncclInvalidUsage);
}
ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int,
                           ncclComm_t, cudaStream_t) {
  return refuse("ncclPutSignal", kNoWindows, ncclInvalidUsage);
}
ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return refuse("ncclSignal", kNoWindows, ncclInvalidUsage);
}
ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return refuse("ncclWaitSignal", kNoWindows, ncclInvalidUsage);
}

// One process's clique, as NCCL's: an id and every rank's init in one group. libcomm binds each
// communicator to the device current at the call; devlist is not consulted.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int*) {
  if (!comm || ndev < 1) return refuse("ncclCommInitAll", "comm is NULL or ndev is below 1");
  ncclUniqueId id;
  if (ncclResult_t failed = ncclGetUniqueId(&id)) return failed;
  ncclGroupStart();
  for (int rank = 0; rank < ndev; ++rank) ncclCommInitRank(&comm[rank], ndev, id, rank);
  return ncclGroupEnd();
}

// Nothing is left to flush: host operations have completed when their call returns, and device
// ones stay ordered on their streams.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return refuse("ncclCommFinalize", "comm is NULL");
  int size = 0;
  return forwarded(comm_count(to_comm(comm), &size));  // refused for a destroyed or aborted comm
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return forwarded(comm_destroy(to_comm(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return forwarded(comm_abort(to_comm(comm))); }

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  comm_config_t settings;
  if (ncclResult_t refused = read_config(config, settings, "ncclCommSplit")) return refused;
  return forwarded(
      comm_split(to_comm(comm), color, key, reinterpret_cast<comm_t*>(newcomm), config ? &settings : nullptr));
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return refuse("ncclCommRevoke", "revokeFlags must be NCCL_REVOKE_DEFAULT (0)");
  return forwarded(comm_revoke(to_comm(comm), "ncclCommRevoke"));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return refuse("ncclCommShrink", "shrinkFlags must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
  }
  comm_config_t settings;
  if (ncclResult_t refused = read_config(config, settings, "ncclCommShrink")) return refused;
  return forwarded(comm_shrink(to_comm(comm), excludeRanksList, excludeRanksCount, reinterpret_cast<comm_t*>(newcomm),
                               config ? &settings : nullptr));
}

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  if (!uniqueId) return refuse("ncclCommGetUniqueId", "uniqueId is NULL");
  return forwarded(comm_get_grow_id(to_comm(comm), reinterpret_cast<comm_unique_id*>(uniqueId)));
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  comm_config_t settings;
  if (ncclResult_t refused = read_config(config, settings, "ncclCommGrow")) return refused;
  return forwarded(comm_grow(to_comm(comm), nRanks, reinterpret_cast<const comm_unique_id*>(uniqueId), rank,
                             reinterpret_cast<comm_t*>(newcomm), config ? &settings : nullptr));
}

const char* ncclGetErrorString(ncclResult_t result) {
  return comm_get_error_string(static_cast<comm_result_t>(result));
}

const char* ncclGetLastError(ncclComm_t comm) {
  return own_error_is_latest ? own_error.c_str() : comm_get_last_error(to_comm(comm));
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return forwarded(comm_get_async_error(to_comm(comm), reinterpret_cast<comm_result_t*>(asyncError)));
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return forwarded(comm_count(to_comm(comm), count)); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return forwarded(comm_cu_device(to_comm(comm), device));
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return forwarded(comm_user_rank(to_comm(comm), rank));
}

// Registration only lets NCCL skip copies; libcomm has nothing to prepare, so the handle is the
// buffer itself and deregistering it does nothing.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t, void** handle) {
  if (!comm || !handle) return refuse("ncclCommRegister", "comm or handle is NULL");
  int size = 0;
  if (ncclResult_t ended = forwarded(comm_count(to_comm(comm), &size))) return ended;
  *handle = buff;
  return ncclSuccess;
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void*) {
  return comm ? ncclSuccess : refuse("ncclCommDeregister", "comm is NULL");
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) {
  return refuse("ncclRedOpCreatePreMulSum", "libcomm has no pre-multiplied sums; scale before or after an ncclSum");
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t, ncclComm_t) {
  return refuse("ncclRedOpDestroy",
                "only operators made by ncclRedOpCreatePreMulSum are destroyed, and libcomm makes none");
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclReduce", kUnknownDatatype);
  if (!known_op(op)) return refuse("ncclReduce", kUnknownOp);
  return forwarded(comm_reduce(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype),
                               static_cast<comm_op_t>(op), root, to_comm(comm), stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclBroadcast", kUnknownDatatype);
  return forwarded(
      comm_broadcast(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype), root, to_comm(comm), stream));
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclAllReduce", kUnknownDatatype);
  if (!known_op(op)) return refuse("ncclAllReduce", kUnknownOp);
  return forwarded(comm_all_reduce(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype),
                                   static_cast<comm_op_t>(op), to_comm(comm), stream));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclReduceScatter", kUnknownDatatype);
  if (!known_op(op)) return refuse("ncclReduceScatter", kUnknownOp);
  return forwarded(comm_reduce_scatter(sendbuff, recvbuff, recvcount, static_cast<comm_datatype_t>(datatype),
                                       static_cast<comm_op_t>(op), to_comm(comm), stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclAllGather", kUnknownDatatype);
  return forwarded(
      comm_all_gather(sendbuff, recvbuff, sendcount, static_cast<comm_datatype_t>(datatype), to_comm(comm), stream));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclAlltoAll", kUnknownDatatype);
  return forwarded(
      comm_all_to_all(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype), to_comm(comm), stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclGather", kUnknownDatatype);
  return forwarded(
      comm_gather(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype), root, to_comm(comm), stream));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclScatter", kUnknownDatatype);
  return forwarded(
      comm_scatter(sendbuff, recvbuff, count, static_cast<comm_datatype_t>(datatype), root, to_comm(comm), stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclSend", kUnknownDatatype);
  return forwarded(comm_send(sendbuff, count, static_cast<comm_datatype_t>(datatype), peer, to_comm(comm), stream));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (!known_datatype(datatype)) return refuse("ncclRecv", kUnknownDatatype);
  return forwarded(comm_recv(recvbuff, count, static_cast<comm_datatype_t>(datatype), peer, to_comm(comm), stream));
}

ncclResult_t ncclGroupStart(void) { return forwarded(comm_group_start()); }
ncclResult_t ncclGroupEnd(void) { return forwarded(comm_group_end()); }

}  // extern "C"
