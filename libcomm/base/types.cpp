#include "comm/types.hpp"

#include "comm/error.hpp"

namespace comm {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::UInt32: return "uint32";
    case DType::Int64: return "int64";
    case DType::UInt64: return "uint64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Bool: return "bool";
  }
  return "unknown dtype";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "product";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::BAnd: return "band";
    case ReduceOp::BOr: return "bor";
    case ReduceOp::BXor: return "bxor";
  }
  return "unknown op";
}

const char* to_string(Collective collective) {
  switch (collective) {
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Gather: return "gather";
    case Collective::Scatter: return "scatter";
    case Collective::AllToAll: return "all_to_all";
    case Collective::Barrier: return "barrier";
  }
  return "unknown collective";
}

std::string to_string(Device device) {
  return device.kind == Device::Kind::Cpu ? "cpu" : "cuda:" + std::to_string(device.index);
}

}  // namespace comm
