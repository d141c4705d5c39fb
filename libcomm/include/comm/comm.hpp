// libcomm: collective communication over TCP, shared memory and CUDA.
// The one header a program includes: process groups, stores and errors.
#pragma once

#include "comm/error.hpp"          // IWYU pragma: export
#include "comm/process_group.hpp"  // IWYU pragma: export
#include "comm/store.hpp"          // IWYU pragma: export
#include "comm/trace.hpp"          // IWYU pragma: export
