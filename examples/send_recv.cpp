// send_recv: blocking point to point. Rank 0 adds one to a zero and sends it to rank 1, which
// receives it; both print what they hold.   commrun -n 2 build/examples/send_recv
#include <comm/comm.hpp>

#include "show.hpp"

int main() try {
  auto group = comm::init_process_group();
  std::vector<float> tensor{0.0f};
  if (group->rank() == 0) {
    tensor[0] += 1;
    group->send(tensor, 1);
  } else if (group->rank() == 1) {
    group->recv(tensor, 0);
  }
  say("rank " + std::to_string(group->rank()) + " has data " + show(tensor));
  return 0;
} catch (const comm::Error& error) {
  std::cerr << error.what() << "\n";
  return 1;
}
