// The world group of this process: the libcomm group torch's default process group runs on,
// which torch's new_group groups are made from (and share the connections of). A shrink or a
// grow of the world makes its result the world, so that groups made afterwards number their
// ranks as torch does then: from the new default group.
#pragma once

#include <memory>

#include "comm/comm.hpp"

namespace torch_libcomm {

// The world, or null (none made yet, or torch destroyed it).
std::shared_ptr<comm::ProcessGroup> world_group();
void set_world_group(const std::shared_ptr<comm::ProcessGroup>& world);
// `successor` (shrunk or grown from `group`) becomes the world if `group` was it.
void succeed_world_group(const comm::ProcessGroup& group, const std::shared_ptr<comm::ProcessGroup>& successor);

}  // namespace torch_libcomm
