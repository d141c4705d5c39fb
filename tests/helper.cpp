// comm-test-helper: the program the process tests start (directly or under commrun).
//   init [URL [RANK [WORLD_SIZE [GROUP [TIMEOUT_MS]]]]]  join, print "joined R/N", exit 0; on
//                                      a comm::Error print it and exit 10
//   exit CODE RANK DELAY_MS PID_DIR    the given rank exits with CODE after DELAY_MS; every rank
//                                      writes its pid to PID_DIR/RANK and the others sleep
//   file-add PATH KEY COUNT            COUNT adds of 1 on KEY in a FileStore at PATH
//   env                                prints RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "comm/comm.hpp"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

int run_init(int argc, char** argv) {
  comm::InitOptions options;
  if (argc > 2) options.init_method = argv[2];
  if (argc > 3) options.rank = std::atoi(argv[3]);
  if (argc > 4) options.world_size = std::atoi(argv[4]);
  if (argc > 5) options.group_name = argv[5];
  if (argc > 6) options.timeout = std::chrono::milliseconds(std::atoll(argv[6]));
  try {
    auto group = comm::init_process_group(options);
    std::cout << "joined " << group->rank() << "/" << group->size() << " local " << group->local_rank() << "/"
              << group->local_size() << std::endl;
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << comm::to_string(error.code()) << ": " << error.what() << std::endl;
    return 10;
  }
}

int run_exit(char** argv) {
  int code = std::atoi(argv[2]);
  std::string rank = env_or("RANK", "0");
  int delay_ms = std::atoi(argv[4]);
  std::ofstream(std::string(argv[5]) + "/" + rank) << ::getpid() << std::endl;
  if (rank == argv[3]) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    std::cout << "rank " << rank << " exiting with " << code << std::endl;
    return code;
  }
  std::this_thread::sleep_for(std::chrono::minutes(5));
  return 0;
}

int run_file_add(char** argv) {
  comm::FileStore store(argv[2], std::chrono::seconds(30));
  int count = std::atoi(argv[4]);
  for (int i = 0; i < count; ++i) store.add(argv[3], 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "init") return run_init(argc, argv);
  if (mode == "exit" && argc == 6) return run_exit(argv);
  if (mode == "file-add" && argc == 5) return run_file_add(argv);
  if (mode == "env") {
    std::cout << env_or("RANK", "-") << " " << env_or("WORLD_SIZE", "-") << " " << env_or("LOCAL_RANK", "-") << " "
              << env_or("LOCAL_WORLD_SIZE", "-") << " " << env_or("MASTER_ADDR", "-") << std::endl;
    std::cout << "partial line without newline";
    return 0;
  }
  std::cerr << "comm-test-helper: unknown mode '" << mode << "'" << std::endl;
  return 2;
}
