// Which device an operation's tensors are on, and for CUDA tensors the stream it is ordered on:
// torch's current stream on that device, as torch's own GPU backends order collectives against
// the caller's work. libcomm orders a group's GPU buffers against one stream per group, so each
// operation on CUDA tensors first sets the group's stream to torch's current one.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "comm/process_group.hpp"

namespace torch_libcomm {

class OperationDevice {
 public:
  explicit OperationDevice(const char* operation) : operation_(operation) {}

  // Every tensor of an operation must be on one device (torch's rule for its backends).
  void add(const at::Tensor& tensor);
  void add(const std::vector<at::Tensor>& tensors) {
    for (const auto& tensor : tensors) add(tensor);
  }
  void add(const std::vector<std::vector<at::Tensor>>& lists) {
    for (const auto& list : lists) add(list);
  }

  // For CUDA tensors: orders the operation on torch's current stream of their device. Refused
  // where this module was built against a torch without CUDA.
  void order_on_current_stream(comm::ProcessGroup& group) const;

 private:
  const char* operation_;
  std::optional<at::Device> device_;
};

// OperationDevice over all the operation's tensor arguments, then ordered.
template <class... TensorArguments>
void order_on_current_stream(comm::ProcessGroup& group, const char* operation, const TensorArguments&... tensors) {
  OperationDevice device(operation);
  (device.add(tensors), ...);
  device.order_on_current_stream(group);
}

}  // namespace torch_libcomm
