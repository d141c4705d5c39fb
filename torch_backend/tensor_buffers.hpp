// From torch's tensors and options to libcomm's buffers and operations, refusing in torch's
// words what libcomm cannot do exactly (a non-contiguous tensor, a dtype or op it lacks).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "comm/types.hpp"

namespace torch_libcomm {

// A view of the tensor's memory: CPU (or CUDA, where torch has it), contiguous, of a dtype
// libcomm has. `what` names the argument in errors ("tensor", "output tensor", ...).
comm::Buffer buffer_of(const at::Tensor& tensor, const char* operation, const char* what = "tensor");
comm::ReduceOp reduce_op_of(const c10d::ReduceOp& op, const char* operation);

// torch's checks that its own backends make: exactly one tensor, lists of the group's size,
// tensors of one dtype and size.
void check_single_tensor(const std::vector<at::Tensor>& tensors, const char* operation);
void check_same_type_and_size(const at::Tensor& reference, const std::vector<at::Tensor>& tensors,
                              const char* operation);
void check_list_size(std::size_t actual, int group_size, const char* operation, const char* what);

}  // namespace torch_libcomm
