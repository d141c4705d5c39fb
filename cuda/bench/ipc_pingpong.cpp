// ipc_pingpong: two processes on one GPU pass a buffer back and forth through CUDA IPC, each
// step a kernel reading the peer's buffer directly (out = peer + 1, bytewise). The ordering
// scheme is the one the library builds on: after enqueuing its kernel a process records an IPC
// event and then raises a host-side flag; the peer, on seeing the flag, makes its stream wait for
// that event. No host synchronisation per step and no kernel spinning on another process's data
// (processes time-share the GPU without MPS, so device-side spinning could deadlock).
//
// The values prove the ordering: after N round trips the buffers hold 2N-1 and 2N (mod 256)
// in every byte, which a step that ran early would break. Prints the round-trip time.
// --wait host makes the host wait for the peer's event (cudaEventSynchronize) before enqueuing,
// instead of the stream: it measures what a hand-off costs when the waiting process has no work
// queued on the GPU meanwhile.
//   ipc_pingpong [--bytes N] [--rounds N] [--wait stream|host]
//   exit 0: correct, 1: wrong or failed, 77: no GPU
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/error.hpp"
#include "cuda/device.hpp"
#include "cuda/ipc.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"

namespace cuda = comm::cuda;

namespace {

// Lives in a shared anonymous mapping made before fork(), so nothing is left behind.
struct Shared {
  cuda::IpcMemoryHandle memory[2];
  cuda::IpcEventHandle event[2];
  std::atomic<std::uint64_t> published[2];
  std::atomic<std::uint64_t> round[2];
  std::atomic<std::uint64_t> finished[2];
};

void wait_for(const std::atomic<std::uint64_t>& value, std::uint64_t at_least, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (value.load(std::memory_order_acquire) < at_least) {
    if (std::chrono::steady_clock::now() > deadline) throw comm::TimeoutError(std::string("peer never got to ") + what);
  }
}

int run_side(Shared& shared, int side, std::size_t bytes, std::uint64_t rounds, bool host_waits) {
  const int device = 0;
  int other = 1 - side;
  cuda::Stream stream(device);
  cuda::DeviceMemory buffer(bytes, device), ones(bytes, device);
  cuda::fill(buffer.data(), 0, bytes, device);
  cuda::fill(ones.data(), 1, bytes, device);
  cuda::InterprocessEvent event(device);
  shared.memory[side] = cuda::export_memory(buffer.data(), device);
  shared.event[side] = event.handle();
  shared.published[side].store(1, std::memory_order_release);
  wait_for(shared.published[other], 1, "publishing its handles");
  double seconds = 0;
  {
    cuda::ImportedMemory peer(shared.memory[other], device);
    cuda::InterprocessEvent peer_event(shared.event[other], device);
    auto start = std::chrono::steady_clock::now();
    for (std::uint64_t k = 1; k <= rounds; ++k) {
      // Side 0 starts each round on side 1's previous result; side 1 answers side 0's.
      std::uint64_t peer_round = side == 0 ? k - 1 : k;
      if (peer_round > 0) {
        wait_for(shared.round[other], peer_round, "the next round");
        if (host_waits) {
          peer_event.synchronize();
        } else {
          peer_event.wait(stream.handle());
        }
      }
      cuda::reduce(buffer.data(), peer.data(), ones.data(), bytes, comm::DType::UInt8, comm::ReduceOp::Sum, device,
                   stream.handle());
      event.record(stream.handle());
      shared.round[side].store(k, std::memory_order_release);
    }
    stream.synchronize();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    shared.finished[side].store(1, std::memory_order_release);
    wait_for(shared.finished[other], 1, "the end");  // no one frees memory the other still reads
  }
  std::vector<unsigned char> result(bytes);
  cuda::copy(result.data(), buffer.data(), bytes, device);
  auto expected = static_cast<unsigned char>((2 * rounds - (side == 0 ? 1 : 0)) & 0xFF);
  std::size_t wrong = 0;
  for (unsigned char value : result) wrong += value != expected;
  if (side == 0) {
    std::printf("ipc_pingpong: %s waits, %llu round trips of %zu bytes, %.2f us per round trip, %zu wrong bytes\n",
                host_waits ? "host" : "stream", static_cast<unsigned long long>(rounds), bytes,
                1e6 * seconds / static_cast<double>(rounds), wrong);
  } else if (wrong > 0) {
    std::printf("ipc_pingpong: side 1 holds %zu wrong bytes (expected %u)\n", wrong, expected);
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = 1 << 20;
  std::uint64_t rounds = 1000;
  bool host_waits = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--bytes")
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--rounds")
      rounds = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--wait")
      host_waits = std::string(argv[i + 1]) == "host";
  }
  // fork() before any CUDA call: a child may not use a CUDA context made by its parent.
  void* mapping = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* shared = new (mapping) Shared{};
  pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  int side = child == 0 ? 1 : 0;
  int result = 1;
  try {
    auto status = cuda::device_status();
    if (status.device_count == 0) {
      if (side == 0) std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
      result = 77;
    } else {
      result = run_side(*shared, side, bytes, rounds, host_waits);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ipc_pingpong side %d: %s\n", side, error.what());
    result = 1;
  }
  if (side == 1) _exit(result);
  int child_status = 0;
  waitpid(child, &child_status, 0);
  int child_result = WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 1;
  return result != 0 ? result : child_result;
}
