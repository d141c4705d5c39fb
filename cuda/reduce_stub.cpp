// Built instead of reduce_kernels.cu when nvcc is absent or -Dcuda=disabled.
#include "comm/error.hpp"
#include "cuda/reduce.hpp"

namespace comm::cuda {
namespace {

[[noreturn]] void reduce_built_without_cuda(const char* op) {
  throw CudaError(
      "this libcomm was built without CUDA, so it cannot reduce GPU buffers; rebuild with nvcc on PATH "
      "(meson setup -Dcuda=enabled)",
      ErrorContext{.op = op});
}

}  // namespace

void reduce(void*, const void*, const void*, std::size_t, DType, ReduceOp, int, void*) {
  reduce_built_without_cuda("reduce");
}

void divide(void*, std::size_t, DType, std::size_t, int, void*) { reduce_built_without_cuda("reduce.avg"); }

}  // namespace comm::cuda
