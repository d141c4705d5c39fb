// subgroup: all_reduce among ranks 0 and 1 only. Every rank calls new_group (as in
// torch.distributed); ranks outside the group get a group they may not use.
//   commrun -n 4 build/examples/subgroup      ranks 0 and 1 print [2, 2, 2]; the others [1, 1, 1]
#include <comm/comm.hpp>

#include "show.hpp"

int main() try {
  auto world = comm::init_process_group();
  auto pair = world->new_group({0, 1});
  std::vector<float> tensor(3, 1.0f);
  if (pair->rank() >= 0) pair->all_reduce(tensor, comm::ReduceOp::Sum);
  say("rank " + std::to_string(world->rank()) + " has data " + show(tensor));
  return 0;
} catch (const comm::Error& error) {
  std::cerr << error.what() << "\n";
  return 1;
}
