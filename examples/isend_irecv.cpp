// isend_irecv: non-blocking point to point. Rank 0 sets the middle of [0, 0, 0] to one and sends
// it to the last rank without blocking; the last rank posts its receive, and both wait on their
// Work before reading the buffer.   commrun -n 4 build/examples/isend_irecv
#include <comm/comm.hpp>

#include "show.hpp"

int main() try {
  auto group = comm::init_process_group();
  int last = group->size() - 1;
  std::vector<float> tensor(3, 0.0f);
  std::shared_ptr<comm::Work> request;
  if (group->rank() == 0) {
    tensor[1] = 1;
    request = group->isend(tensor, last);
  } else if (group->rank() == last) {
    request = group->irecv(tensor, 0);
  }
  if (request) request->wait();  // only now may the buffer be touched
  say("rank " + std::to_string(group->rank()) + " has data " + show(tensor));
  return 0;
} catch (const comm::Error& error) {
  std::cerr << error.what() << "\n";
  return 1;
}
