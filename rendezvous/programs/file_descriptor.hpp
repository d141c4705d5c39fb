// An owned file descriptor: closed when it goes, moved but never copied (the ground's own).
#pragma once

#include "libcomm/base/guarded_file.hpp"

namespace comm::launcher {

using FileDescriptor = comm::OwnedDescriptor;

}  // namespace comm::launcher
