#include "comm/types.hpp"

#include "comm/error.hpp"
#include "libcomm/base/collective_traits.hpp"

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

// element_size's table against each dtype's C++ type.
static_assert(element_size(DType::Int8) == sizeof(std::int8_t) && element_size(DType::UInt8) == 1 &&
              element_size(DType::Int32) == sizeof(std::int32_t) && element_size(DType::UInt32) == 4 &&
              element_size(DType::Int64) == sizeof(std::int64_t) && element_size(DType::UInt64) == 8 &&
              element_size(DType::Float16) == 2 && element_size(DType::BFloat16) == 2 &&
              element_size(DType::Float32) == sizeof(float) && element_size(DType::Float64) == sizeof(double) &&
              element_size(DType::Bool) == sizeof(bool) && element_size(static_cast<DType>(11)) == 0);

const char* to_string(Collective collective) {
  // A table (collective_traits.hpp): every collective names itself (its record, its errors) on
  // the hot path.
  auto index = static_cast<std::size_t>(collective);
  return index < kCollectiveNames.size() ? kCollectiveNames[index] : "unknown collective";
}

std::string to_string(Device device) {
  return device.kind == Device::Kind::Cpu ? "cpu" : "cuda:" + std::to_string(device.index);
}

}  // namespace comm
