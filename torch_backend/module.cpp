// The extension torch_libcomm._C: the function torch.distributed calls to make a libcomm
// backend. torch_libcomm/__init__.py registers it under the name "libcomm".
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "libcomm_backend.hpp"
#include "torch_store.hpp"
#include "world_group.hpp"

namespace py = pybind11;

namespace {

// Groups are made one at a time: each waits for the other ranks to make it too.
std::mutex creation_mutex;

// torch calls this for the world group (no global ranks) and for every new_group, on the group's
// members only, with a store already prefixed for the group and a group name all members share.
c10::intrusive_ptr<c10d::Backend> create(const c10d::DistributedBackendOptions& options, const py::object&) {
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout);
  std::shared_ptr<comm::ProcessGroup> group;
  {
    py::gil_scoped_release no_gil;  // making a group waits for the other ranks
    std::lock_guard lock(creation_mutex);
    auto parent = torch_libcomm::world_group();
    if (!options.global_ranks_in_group.empty() && parent) {
      std::vector<int> ranks(options.global_ranks_in_group.begin(), options.global_ranks_in_group.end());
      group = parent->new_group(std::move(ranks), "torch/" + options.group_id, timeout);
    } else {
      comm::InitOptions init;
      init.store = std::make_shared<torch_libcomm::TorchStore>(options.store, timeout);
      init.rank = options.group_rank;
      init.world_size = options.group_size;
      init.timeout = timeout;
      group = comm::init_process_group(init);
      if (options.global_ranks_in_group.empty()) torch_libcomm::set_world_group(group);
    }
  }
  auto backend = c10::make_intrusive<torch_libcomm::LibcommBackend>(std::move(group), timeout);
  backend->setGroupUid(options.group_id);
  return backend;
}

// torch's ProcessGroup names a plugin's backend "custom" (getBackendName reads its BackendType,
// which has no value for plugins), and DDP's logger records that name where dist.get_backend()
// says "libcomm". A process group whose every device runs libcomm is made as this subclass
// instead (torch_libcomm/__init__.py), which says its backend's own name; the rest is torch's.
class LibcommProcessGroup : public c10d::ProcessGroup {
 public:
  using c10d::ProcessGroup::ProcessGroup;
  const std::string getBackendName() const override { return "libcomm"; }
};

torch_libcomm::LibcommBackend& libcomm_backend(const c10::intrusive_ptr<c10d::Backend>& backend, const char* what) {
  auto* libcomm = dynamic_cast<torch_libcomm::LibcommBackend*>(backend.get());
  TORCH_CHECK(libcomm != nullptr, "torch_libcomm.", what, ": the group's backend is ",
              backend ? backend->getBackendName() : std::string("none"), ", not libcomm");
  return *libcomm;
}

}  // namespace

PYBIND11_MODULE(_C, module) {
  module.doc() = "libcomm as a torch.distributed backend (import torch_libcomm to register it)";
  py::module_::import("torch.distributed");  // binds Backend and the options types
  module.def("_create", &create, py::arg("backend_options"), py::arg("pg_options"));
  // A process group (no backends yet) that names its backend "libcomm" (LibcommProcessGroup).
  module.def(
      "_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
        return c10::intrusive_ptr<c10d::ProcessGroup>(c10::make_intrusive<LibcommProcessGroup>(store, rank, size));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"));
  // torch's ProcessGroup reports sequence numbers only for the backends it names (Gloo, NCCL,
  // ...); this reads a libcomm backend's: collectives issued since _set_sequence_number_for_group.
  module.def(
      "_sequence_number",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) { return backend->getSequenceNumberForGroup(); },
      py::arg("backend"));
  // torch_libcomm.shrink and grow (__init__.py makes torch process groups of what these return).
  module.def(
      "_shrink",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, std::vector<int> exclude) {
        auto& libcomm = libcomm_backend(backend, "shrink");
        py::gil_scoped_release no_gil;  // the survivors agree
        auto [shrunk, survivors] = libcomm.shrink_to_survivors(std::move(exclude));
        return std::make_pair(c10::intrusive_ptr<c10d::Backend>(std::move(shrunk)), std::move(survivors));
      },
      py::arg("backend"), py::arg("exclude"));
  module.def(
      "_grow",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, int count) {
        auto& libcomm = libcomm_backend(backend, "grow");
        py::gil_scoped_release no_gil;  // the newcomers join
        return c10::intrusive_ptr<c10d::Backend>(libcomm.grow(count));
      },
      py::arg("backend"), py::arg("count"));
  // torch_libcomm.dump_trace: this process's flight recorder as comm_trace_rank<R>.json.
  module.def(
      "_dump_trace",
      [](const std::string& dir) {
        py::gil_scoped_release no_gil;
        return comm::dump_trace(dir);
      },
      py::arg("dir") = "");
}
