#include "device_stream.hpp"

#include <c10/util/Exception.h>

#if TORCH_LIBCOMM_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace torch_libcomm {

void OperationDevice::add(const at::Tensor& tensor) {
  if (!tensor.defined()) return;  // buffer_of names undefined tensors
  if (!device_) {
    device_ = tensor.device();
    return;
  }
  TORCH_CHECK(tensor.device() == *device_, "ProcessGroup libcomm: ", operation_,
              ": tensors must all be on one device, got ", *device_, " and ", tensor.device());
}

void OperationDevice::order_on_current_stream(comm::ProcessGroup& group) const {
  if (!device_ || !device_->is_cuda()) return;
#if TORCH_LIBCOMM_CUDA
  // The stream torch's kernels on these tensors run on: the collective waits for them and work
  // enqueued afterwards sees its results, with no event and no host wait in between. Since the
  // memory is used on the stream it was allocated for, the caching allocator needs no
  // recordStream either.
  group.set_cuda_stream(c10::cuda::getCurrentCUDAStream(device_->index()).stream());
#else
  (void)group;
  TORCH_CHECK(false, "ProcessGroup libcomm: ", operation_, ": a tensor on ", *device_,
              ", but torch_libcomm was built against a torch without CUDA; rebuild it where torch has CUDA");
#endif
}

}  // namespace torch_libcomm
