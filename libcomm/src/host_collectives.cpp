// The collectives on host buffers: one path for all of them. The call's algorithm (the caller's,
// COMM_ALGO's or the tuner's) is looked up in the algorithm table and run over the group's
// transport through start_collective. Arguments are checked already (collectives.cpp).
#include <memory>
#include <utility>

#include "algorithms/algorithm_table.hpp"
#include "libcomm/src/collective_call.hpp"

namespace comm {

std::shared_ptr<Work> ProcessGroup::Impl::host_collective(algorithms::HostCall call, Algorithm requested, bool async) {
  algorithms::Resources resources{choose(call.collective, call.bytes(), requested), &host_layout_, arena_.get()};
  Algorithm algorithm = resources.choice.algorithm;
  algorithms::HostEntryPoint run = algorithms::find_algorithm(call.collective, algorithm)->run;
  bool barrier = call.collective == Collective::Barrier;
  CallShape shape{call.collective, barrier ? -1 : static_cast<int>(call.dtype), call.count, call.root};
  bool reduces = call.collective == Collective::AllReduce || call.collective == Collective::Reduce ||
                 call.collective == Collective::ReduceScatter;
  Buffer described(nullptr, call.count, call.dtype);
  std::uint64_t fingerprint = call_fingerprint(call.collective, algorithm, barrier ? nullptr : &described,
                                               reduces ? static_cast<int>(call.op) : -1, call.root, call.count);
  std::size_t bytes = call.bytes();
  return start_collective(
      shape, bytes, fingerprint,
      [run, resources, call = std::move(call)](const algorithms::CollectiveContext& context) {
        run(context, call, resources);
      },
      async);
}

}  // namespace comm
