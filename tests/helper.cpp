// comm-test-helper: the program the process tests start (directly or under commrun).
//   init [URL [RANK [WORLD_SIZE [GROUP [TIMEOUT_MS]]]]]  join, print "joined R/N", exit 0; on
//                                      a comm::Error print it and exit 10
//   exit CODE RANK DELAY_MS PID_DIR    the given rank exits with CODE after DELAY_MS; every rank
//                                      writes its pid to PID_DIR/RANK and the others sleep
//   file-add PATH KEY COUNT            COUNT adds of 1 on KEY in a FileStore at PATH
//   store-secrecy                      under commrun: joins, all_reduces; rank 0 checks that a
//                                      client without the job secret is refused by the store and
//                                      that the store holds no token
//   hang SECONDS                       the last rank waits in a call of a subgroup with the rank
//                                      before it, which sleeps SECONDS first; everyone else waits
//                                      in a world all_reduce meanwhile (the hang verdict's case)
//   die-before KEY                     joins through the TcpStore at MASTER_ADDR:MASTER_PORT (hosted
//                                      by the test); rank 2 exits at once when init is about to
//                                      set a key ending in KEY, the others report how init ended
//   env                                prints RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/comm.hpp"
#include "tests/support/dying_store.hpp"

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
    // The group works: every rank brings rank + 1; the sum of 1..n is known independently.
    std::int64_t value = group->rank() + 1;
    group->all_reduce(comm::Buffer(&value, 1, comm::DType::Int64));
    std::int64_t expected = std::int64_t(group->size()) * (group->size() + 1) / 2;
    if (value != expected) {
      std::cout << "WRONG sum " << value << " expected " << expected << std::endl;
      return 11;
    }
    std::cout << "sum ok " << value << std::endl;
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

// Every rank writes its pid to the directory; the `victim` rank then waits to be killed, and the
// others exit with status 1 as soon as it is dead (gone, or a zombie nobody reaped yet): the way
// survivors of a killed rank fail right after it.
int run_follow(char** argv) {
  std::string rank = env_or("RANK", "0"), victim = argv[2], directory = argv[3];
  std::ofstream(directory + "/" + rank) << ::getpid() << std::endl;
  if (rank == victim) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
    return 0;
  }
  auto dead = [&] {
    std::ifstream pid_file(directory + "/" + victim);
    std::string pid;
    if (!(pid_file >> pid)) return false;
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string field, name, state;
    return !(stat >> field >> name >> state) || state == "Z" || state == "X";
  };
  while (!dead()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::cout << "rank " << rank << " saw rank " << victim << " die" << std::endl;
  return 1;
}

// Rank 0 creates a shared-memory segment named as libcomm names its own and is stopped before it
// could unlink it (the test's rank 1 fails, so commrun stops the job); commrun must remove it.
// A process that exits while its store server (with a job secret) is answering hellos: the
// server's thread must not crash in the exit (issue 27: OpenSSL's state freed at exit under it).
int run_exit_while_serving() {
  auto server = std::make_unique<comm::TcpStoreServer>(0, "127.0.0.1", std::string("a secret of more than 16 chars"));
  std::uint16_t port = server->port();
  std::thread([port] {
    while (true) {
      try {
        comm::TcpStore stranger("127.0.0.1", port, comm::TcpStoreOptions{.timeout = std::chrono::seconds(1)});
      } catch (const comm::Error&) {  // refused: it holds no secret; again
      }
    }
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::exit(0);  // no destructor of the server runs: its thread is still serving
}

int run_linger_shm() {
  std::string rank = env_or("RANK", "0");
  if (rank == "0") {
    std::string name = "/comm-lingertest-" + std::to_string(::getpid()) + "-0-1";
    int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return 3;
    ::close(fd);
    std::cout << "created " << name << std::endl;
    std::this_thread::sleep_for(std::chrono::minutes(5));
    return 0;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return 1;
}

// All pairs, then a ring, then any-source gathering at rank 0; each message's bytes say who
// sent it, to whom and which one it is.
int run_p2p_exchange() {
  try {
    auto group = comm::init_process_group();
    int me = group->rank(), n = group->size();
    auto fill = [](int from, int to, std::size_t bytes) {
      std::vector<std::uint8_t> data(bytes);
      for (std::size_t i = 0; i < bytes; ++i)
        data[i] = static_cast<std::uint8_t>(from * 37 + to * 11 + i * 7 + (i >> 10));
      return data;
    };
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{300000}}) {
      std::vector<std::vector<std::uint8_t>> out(n), in(n);
      std::vector<std::shared_ptr<comm::Work>> works;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == me) continue;
        in[peer].resize(bytes);
        works.push_back(group->irecv(comm::Buffer(in[peer].data(), bytes, comm::DType::UInt8), peer, 1));
        out[peer] = fill(me, peer, bytes);
        works.push_back(group->isend(comm::Buffer(out[peer].data(), bytes, comm::DType::UInt8), peer, 1));
      }
      for (auto& work : works) work->wait();
      for (int peer = 0; peer < n; ++peer) {
        if (peer != me && in[peer] != fill(peer, me, bytes)) {
          std::cout << "ERROR wrong bytes from rank " << peer << " (" << bytes << " bytes)" << std::endl;
          return 10;
        }
      }
    }
    std::int64_t token = me;
    if (me != 0) group->recv(comm::Buffer(&token, 1, comm::DType::Int64), me - 1, 2);
    if (n > 1) group->send(comm::Buffer(&token, 1, comm::DType::Int64), (me + 1) % n, 2);
    if (me == 0 && n > 1) group->recv(comm::Buffer(&token, 1, comm::DType::Int64), n - 1, 2);
    std::cout << "p2p ok rank " << me << " over " << group->transport_name() << std::endl;
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 10;
  }
}

// Rank 1 streams 16 MiB messages to rank 0 until killed; rank 0 receives until that fails and
// reports how long after its last good message the failure came.
// Runs step() until it throws; says "receiving" after the fourth success, then the failure and
// how long after the last success it came (exit status 10).
int until_failure(const std::function<void()>& step) {
  auto last = std::chrono::steady_clock::now();
  try {
    for (int done = 0;; ++done) {
      step();
      last = std::chrono::steady_clock::now();
      if (done == 3) std::cout << "receiving" << std::endl;
    }
  } catch (const comm::Error& error) {
    auto after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - last);
    std::cout << "FAILED " << comm::to_string(error.code()) << " after " << after.count() << " ms, about peer "
              << error.peer() << ": " << error.what() << std::endl;
    return 10;
  }
}

int run_p2p_stream() {
  try {
    auto group = comm::init_process_group();
    std::vector<std::uint8_t> data(16 << 20);
    comm::Buffer buffer(data.data(), data.size(), comm::DType::UInt8);
    if (group->rank() == 1) {
      std::cout << "streaming" << std::endl;
      while (true) group->send(buffer, 0);
    }
    return until_failure([&] { group->recv(buffer, 1); });
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 11;
  }
}

// Every rank all_reduces `count` floats with `algorithm` until one fails (the test kills one):
// through shared memory (arena-stream: two ranks), or round the ring (ring-stream: in a ring of
// four, two survivors hear of the death only from the other survivors).
int run_all_reduce_stream(std::size_t count, std::string_view algorithm) {
  try {
    auto group = comm::init_process_group();
    std::vector<float> data(count, 1.0f);
    return until_failure([&] {
      group->all_reduce(comm::Buffer(data.data(), data.size(), comm::DType::Float32), comm::ReduceOp::Max, algorithm);
    });
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 11;
  }
}

// Rank 0 receives from rank 2 once the file COMM_TEST_GO exists (connections on first use: it
// asks rank 2 to connect to it); the others wait. The test stops ranks 1-3 first and kills 2.
int run_ask_then_wait() {
  try {
    auto group = comm::init_process_group();
    std::cout << "ready" << std::endl;
    if (group->rank() != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    while (!std::filesystem::exists(env_or("COMM_TEST_GO", "")))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::cout << "asking" << std::endl;
    std::int32_t value = 0;
    auto started = std::chrono::steady_clock::now();
    try {
      group->recv(comm::Buffer(&value, 1, comm::DType::Int32), 2);
    } catch (const comm::Error& error) {
      auto after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      std::cout << "FAILED " << comm::to_string(error.code()) << " after " << after.count() << " ms, about peer "
                << error.peer() << ": " << error.what() << std::endl;
      return 10;
    }
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 11;
  }
}

int run_file_add(char** argv) {
  comm::FileStore store(argv[2], std::chrono::seconds(30));
  int count = std::atoi(argv[4]);
  for (int i = 0; i < count; ++i) store.add(argv[3], 1);
  return 0;
}

int run_die_before(const std::string& suffix) {
  int rank = std::atoi(env_or("RANK", "0").c_str());
  try {
    auto tcp = std::make_shared<comm::TcpStore>(
        env_or("MASTER_ADDR", "127.0.0.1"), static_cast<std::uint16_t>(std::atoi(env_or("MASTER_PORT", "0").c_str())),
        comm::TcpStoreOptions{.timeout = std::chrono::seconds(60)});
    comm::InitOptions options;
    options.store =
        std::make_shared<comm::testing::DyingStore>(tcp, rank == 2 ? suffix : "", [](const std::string& key) {
          std::cout << "dying before " << key << std::endl;
          std::_Exit(3);
        });
    options.rank = rank;
    options.world_size = std::atoi(env_or("WORLD_SIZE", "1").c_str());
    options.timeout = std::chrono::seconds(60);
    auto group = comm::init_process_group(options);
    double value = 1;
    group->all_reduce(comm::Buffer(&value, 1, comm::DType::Float64));
    std::cout << "joined and reduced " << value << std::endl;
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << comm::to_string(error.code()) << " peer " << error.peer() << ": " << error.what()
              << std::endl;
    return 10;
  }
}

int run_store_secrecy() {
  try {
    auto group = comm::init_process_group({});
    double value = group->rank() + 1, expected = group->size() * (group->size() + 1) / 2.0;
    group->all_reduce(comm::Buffer(&value, 1, comm::DType::Float64));
    if (value != expected) {
      std::cout << "WRONG all_reduce " << value << std::endl;
      return 1;
    }
    if (group->rank() == 0) {
      std::string secret = env_or("COMM_JOB_TOKEN", "");
      std::cout << "secret given: " << (secret.size() >= 16 ? "yes" : "no") << std::endl;
      std::string host = env_or("MASTER_ADDR", "");
      auto port = static_cast<std::uint16_t>(std::atoi(env_or("MASTER_PORT", "0").c_str()));
      try {
        comm::TcpStore stranger(host, port,
                                comm::TcpStoreOptions{.timeout = std::chrono::seconds(10), .job_secret = ""});
        std::cout << "stranger admitted, read token: " << stranger.check({"default_pg/job_token"}) << std::endl;
      } catch (const comm::InvalidArgumentError& error) {
        std::cout << "stranger refused: " << error.what() << std::endl;
      }
      comm::TcpStore member(host, port, comm::TcpStoreOptions{.timeout = std::chrono::seconds(10)});
      std::cout << "token in store: " << (member.check({"default_pg/job_token"}) ? "yes" : "no") << std::endl;
    }
    group->barrier();
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 10;
  }
}

// hierarchical: ranks 2k and 2k+1 say they share a host (COMM_HOST_ID), and the world's
// all_reduce #1 runs the hierarchy, whose phases run on parts of the group.
int run_hang(double seconds, bool hierarchical) {
  try {
    if (hierarchical) {
      const char* rank = std::getenv("RANK");
      ::setenv("COMM_HOST_ID", ("host" + std::to_string(std::atoi(rank ? rank : "0") / 2)).c_str(), 1);
    }
    auto world = comm::init_process_group({});
    int n = world->size(), me = world->rank();
    auto pair = world->new_group({n - 2, n - 1});
    double value = 1;
    world->all_reduce(comm::Buffer(&value, 1, comm::DType::Float64));  // all_reduce #0 of the world
    if (me == n - 2) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    if (me >= n - 2) {
      double pair_value = 1;
      pair->all_reduce(comm::Buffer(&pair_value, 1, comm::DType::Float64));
      if (pair_value != 2) return 1;
    }
    std::vector<float> data(1024, 1.0f);
    world->all_reduce(comm::Buffer(data.data(), data.size(), comm::DType::Float32), comm::ReduceOp::Sum,
                      hierarchical ? "hierarchical" : "");  // #1
    for (float x : data) {
      if (x != static_cast<float>(n)) return 1;
    }
    std::cout << "hang resolved on rank " << me << std::endl;
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << error.what() << std::endl;
    return 10;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "init") return run_init(argc, argv);
  if (mode == "exit" && argc == 6) return run_exit(argv);
  if (mode == "file-add" && argc == 5) return run_file_add(argv);
  if (mode == "follow" && argc == 4) return run_follow(argv);
  if (mode == "linger-shm") return run_linger_shm();
  if (mode == "exit-while-serving") return run_exit_while_serving();
  if (mode == "store-secrecy") return run_store_secrecy();
  if (mode == "die-before" && argc == 3) return run_die_before(argv[2]);
  if (mode == "hang" && (argc == 3 || argc == 4)) {
    return run_hang(std::atof(argv[2]), argc == 4 && std::string(argv[3]) == "hierarchical");
  }
  if (mode == "p2p-exchange") return run_p2p_exchange();
  if (mode == "p2p-stream") return run_p2p_stream();
  if (mode == "ask-then-wait") return run_ask_then_wait();
  if (mode == "arena-stream") return run_all_reduce_stream(1 << 20, "shared_memory");
  if (mode == "ring-stream") return run_all_reduce_stream(1 << 18, "ring");
  if (mode == "inherited-fds") {  // descriptors beyond stdin, stdout and stderr this process started with
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      int fd = std::stoi(entry.path().filename().string());
      std::error_code ec;
      auto target = std::filesystem::read_symlink(entry.path(), ec).string();
      if (fd > 2 && !ec && target.rfind("/proc/", 0) != 0) found.push_back(target);  // not the listing itself
    }
    std::cout << "inherited " << found.size();
    for (const auto& target : found) std::cout << " " << target;
    std::cout << std::endl;
    return 0;
  }
  if (mode == "env") {
    cpu_set_t cpus;
    ::sched_getaffinity(0, sizeof cpus, &cpus);
    std::cout << env_or("RANK", "-") << " " << env_or("WORLD_SIZE", "-") << " " << env_or("LOCAL_RANK", "-") << " "
              << env_or("LOCAL_WORLD_SIZE", "-") << " " << env_or("MASTER_ADDR", "-") << " cpus=" << CPU_COUNT(&cpus)
              << std::endl;
    std::cout << "partial line without newline";
    return 0;
  }
  std::cerr << "comm-test-helper: unknown mode '" << mode << "'" << std::endl;
  return 2;
}
