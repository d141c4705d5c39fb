#include "tensor_buffers.hpp"

#include <c10/util/Exception.h>

namespace torch_libcomm {
namespace {

bool dtype_of(at::ScalarType type, comm::DType& dtype) {
  switch (type) {
    case at::kFloat: dtype = comm::DType::Float32; return true;
    case at::kDouble: dtype = comm::DType::Float64; return true;
    case at::kHalf: dtype = comm::DType::Float16; return true;
    case at::kBFloat16: dtype = comm::DType::BFloat16; return true;
    case at::kChar: dtype = comm::DType::Int8; return true;
    case at::kByte: dtype = comm::DType::UInt8; return true;
    case at::kInt: dtype = comm::DType::Int32; return true;
    case at::kLong: dtype = comm::DType::Int64; return true;
    case at::kBool: dtype = comm::DType::Bool; return true;
    default: return false;
  }
}

}  // namespace

comm::Buffer buffer_of(const at::Tensor& tensor, const char* operation, const char* what) {
  TORCH_CHECK(tensor.defined(), "ProcessGroup libcomm: ", operation, ": undefined ", what);
  TORCH_CHECK(tensor.layout() == at::kStrided, "ProcessGroup libcomm: ", operation, ": the ", what, " is ",
              tensor.layout(), "; libcomm takes dense tensors (call .to_dense() first)");
  TORCH_CHECK(tensor.is_contiguous(), "ProcessGroup libcomm: ", operation, ": ", what,
              " must be contiguous (call .contiguous() first)");
  comm::DType dtype{};
  TORCH_CHECK(dtype_of(tensor.scalar_type(), dtype), "ProcessGroup libcomm: ", operation, ": unsupported dtype ",
              tensor.scalar_type(),
              " (libcomm has float16, bfloat16, float32, float64, int8, uint8, int32, int64 and bool)");
  comm::Device device{};
  if (tensor.is_cuda()) {
    device = comm::Device{comm::Device::Kind::Cuda, static_cast<int>(tensor.get_device())};
  } else {
    TORCH_CHECK(tensor.is_cpu(), "ProcessGroup libcomm: ", operation, ": unsupported device ", tensor.device());
  }
  return comm::Buffer(tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), dtype, device);
}

comm::ReduceOp reduce_op_of(const c10d::ReduceOp& op, const char* operation) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return comm::ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return comm::ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT: return comm::ReduceOp::Product;
    case c10d::ReduceOp::MIN: return comm::ReduceOp::Min;
    case c10d::ReduceOp::MAX: return comm::ReduceOp::Max;
    case c10d::ReduceOp::BAND: return comm::ReduceOp::BAnd;
    case c10d::ReduceOp::BOR: return comm::ReduceOp::BOr;
    case c10d::ReduceOp::BXOR: return comm::ReduceOp::BXor;
    default: break;
  }
  TORCH_CHECK(false, "ProcessGroup libcomm: ", operation, ": unsupported reduce op ", static_cast<int>(op.op_),
              " (PREMUL_SUM is NCCL's)");
}

void check_single_tensor(const std::vector<at::Tensor>& tensors, const char* operation) {
  TORCH_CHECK(tensors.size() == 1, "ProcessGroup libcomm: ", operation, " takes a single tensor, got ", tensors.size());
}

void check_same_type_and_size(const at::Tensor& reference, const std::vector<at::Tensor>& tensors,
                              const char* operation) {
  for (const auto& tensor : tensors) {
    TORCH_CHECK(tensor.scalar_type() == reference.scalar_type(), "ProcessGroup libcomm: ", operation,
                ": tensors of different dtypes (", reference.scalar_type(), " and ", tensor.scalar_type(), ")");
    TORCH_CHECK(tensor.numel() == reference.numel(), "ProcessGroup libcomm: ", operation,
                ": tensors of different sizes (", reference.numel(), " and ", tensor.numel(), " elements)");
  }
}

void check_list_size(std::size_t actual, int group_size, const char* operation, const char* what) {
  TORCH_CHECK(actual == static_cast<std::size_t>(group_size), "ProcessGroup libcomm: ", operation, ": ", what,
              " must hold one tensor per rank of the group (", group_size, "), got ", actual);
}

}  // namespace torch_libcomm
