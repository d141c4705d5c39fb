// hello: every rank joins the job through the store and says who it is.
//   commrun -n 4 build/examples/hello
#include <unistd.h>

#include <comm/comm.hpp>
#include <iostream>

int main() {
  try {
    auto group = comm::init_process_group();
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::cout << "hello from rank " << group->rank() << " of " << group->size() << " (local rank "
              << group->local_rank() << " on " << host << ")" << std::endl;
  } catch (const comm::Error& error) {
    std::cerr << "hello: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
