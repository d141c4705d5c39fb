// find_each_other: processes started by hand, with no rank, find each other as the tutorial's
// init_process_group documentation describes, and get ranks 0..3 in the order they arrive:
// through a file every process can open, or through an IP multicast group ("group_name" keeps
// jobs on the same file or group apart).
//   for i in 1 2 3 4; do build/examples/find_each_other file:///tmp/sharedfile & done; wait
//   url='tcp://[ff15:1e18:5d4c:4cf0:d02d:b659:53ba:b0a7]:23456'
//   for i in 1 2 3 4; do build/examples/find_each_other "$url" & done; wait
#include <comm/comm.hpp>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string init_method = argc > 1 ? argv[1] : "file:///tmp/libcomm-sharedfile";
  try {
    auto group = comm::init_process_group({.init_method = init_method, .world_size = 4, .group_name = "mygroup"});
    // They compute together: the sum of every rank.
    std::int64_t sum = group->rank();
    group->all_reduce(comm::Buffer(&sum, 1, comm::DType::Int64));
    std::cout << "rank " << group->rank() << " of " << group->size() << " through " << init_method << "; sum of ranks "
              << sum << std::endl;
  } catch (const comm::Error& error) {
    std::cerr << "find_each_other: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
