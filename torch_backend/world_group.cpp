#include "world_group.hpp"

#include <mutex>

namespace torch_libcomm {
namespace {

std::mutex world_mutex;
std::weak_ptr<comm::ProcessGroup> world;  // torch owns it

}  // namespace

std::shared_ptr<comm::ProcessGroup> world_group() {
  std::lock_guard lock(world_mutex);
  return world.lock();
}

void set_world_group(const std::shared_ptr<comm::ProcessGroup>& group) {
  std::lock_guard lock(world_mutex);
  world = group;
}

void succeed_world_group(const comm::ProcessGroup& group, const std::shared_ptr<comm::ProcessGroup>& successor) {
  std::lock_guard lock(world_mutex);
  if (world.lock().get() == &group) world = successor;
}

}  // namespace torch_libcomm
