#include "libcomm/src/group_devices.hpp"

#include <string>

#include "comm/error.hpp"
#include "libcomm/base/check.hpp"
#include "libcomm/base/environment.hpp"
#include "libcomm/base/log.hpp"

namespace comm {

using algorithms::DevicePath;

DevicePath GroupDevices::path(const char* op) {
  if (path_) return *path_;
  std::string requested = environment::get("COMM_CUDA_PATH").value_or("auto");
  bool one_host = size_ == 1 || transport_.capabilities().same_host_shared_memory;
  ErrorContext context{.rank = rank_, .op = op};
  COMM_CHECK(requested == "auto" || requested == "ipc" || requested == "staging", InvalidArgumentError, context,
             "COMM_CUDA_PATH=" + requested + " is not one of auto, ipc, staging");
  COMM_CHECK(requested != "ipc" || one_host, InvalidArgumentError, context,
             std::string("COMM_CUDA_PATH=ipc, but this group's peers are reached over ") + transport_.medium() +
                 ": CUDA IPC needs every rank on one host; unset it to stage through host memory");
  DevicePath path = requested == "staging" || !one_host ? DevicePath::Staging : DevicePath::Ipc;
  std::string why = requested != "auto" ? "COMM_CUDA_PATH=" + requested
                    : one_host          ? std::string("every rank on this host")
                                        : std::string("peers reached over ") + transport_.medium();
  log::get(log::Subsystem::Cuda)
      .info("GPU buffers of group {} go {} ({})", group_id_,
            path == DevicePath::Ipc ? "through CUDA IPC" : "staged through pinned host memory", why);
  path_ = path;
  return path;
}

algorithms::DeviceResources GroupDevices::resources(const char* op, int device, Store* one_host_store) {
  algorithms::DeviceResources resources{.stream = stream_, .store = one_host_store};
  int in_use = 0;
  if (path(op) == DevicePath::Ipc) {
    if (!ipc_) ipc_ = std::make_unique<algorithms::IpcState>(device, size_);
    resources.ipc = ipc_.get();
    in_use = ipc_->device();
  } else {
    if (!staging_) staging_ = std::make_unique<algorithms::StagingState>(device);
    resources.staging = staging_.get();
    in_use = staging_->device();
  }
  COMM_CHECK(in_use == device, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "this group's GPU collectives use cuda:" + std::to_string(in_use) +
                 ", not cuda:" + std::to_string(device) + "; use one device per rank and group");
  return resources;
}

detail::GpuLane& GroupDevices::lane(const Buffer& buffer, int peer, bool receiving, const char* op) {
  std::lock_guard lock(lanes_mutex_);
  auto& lane = lanes_[{receiving, peer}];
  if (!lane) lane = std::make_unique<detail::GpuLane>(buffer.device.index);
  COMM_CHECK(lane->device == buffer.device.index, InvalidArgumentError, (ErrorContext{.rank = rank_, .op = op}),
             "this group's GPU transfers with rank " + std::to_string(peer) +
                 " use cuda:" + std::to_string(lane->device) + ", not " + to_string(buffer.device) +
                 "; use one device per rank and group");
  return *lane;
}

}  // namespace comm
