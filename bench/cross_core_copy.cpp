// cross_core_copy: how fast bytes one core writes reach another core, the cost under every
// shared-memory transfer. Two processes on cores 0 and 1 share a mapping with two slots: the
// writer fills a slot (ordinary stores, or streaming stores that bypass its cache), raises a
// flag, and the reader sums the slot into a private buffer and releases it. Prints GB/s for
// both store kinds and a few piece sizes; run it several times: on the development VM the
// ordinary figure is bimodal from one launch to the next (docs/results/collectives.md).
//   build/bench/cross_core_copy [total MiB per figure, default 256]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace {

struct alignas(64) Flags {
  alignas(64) std::atomic<long> posted{0};
  alignas(64) std::atomic<long> consumed{0};
};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

void copy(unsigned char* target, const unsigned char* source, std::size_t bytes, bool streaming) {
#if defined(__x86_64__)
  if (streaming) {  // target is 64-byte aligned and bytes a multiple of 64 here
    for (std::size_t i = 0; i < bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(target + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i)));
    }
    _mm_sfence();  // the flag's release store does not order streaming stores
    return;
  }
#endif
  std::memcpy(target, source, bytes);
}

double measure(std::size_t piece, std::size_t total, bool streaming) {
  long pieces = static_cast<long>(total / piece);
  std::size_t mapped = 4096 + 2 * piece;
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) std::exit(1);
  std::memset(base, 0, mapped);
  auto* flags = new (base) Flags;
  auto* slots = static_cast<unsigned char*>(base) + 4096;
  pid_t reader = ::fork();
  if (reader == 0) {
    pin_to(1);
    std::vector<float> sum(piece / sizeof(float));
    for (long i = 1; i <= pieces; ++i) {
      while (flags->posted.load(std::memory_order_acquire) < i) {
      }
      const auto* values = reinterpret_cast<const float*>(slots + (i & 1) * piece);
      for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += values[k];
      flags->consumed.store(i, std::memory_order_release);
    }
    std::_Exit(sum[0] == -1.0f ? 1 : 0);
  }
  pin_to(0);
  std::vector<unsigned char> source(piece, 1);
  auto start = std::chrono::steady_clock::now();
  for (long i = 1; i <= pieces; ++i) {
    while (flags->consumed.load(std::memory_order_acquire) < i - 1) {
    }
    copy(slots + (i & 1) * piece, source.data(), piece, streaming);
    flags->posted.store(i, std::memory_order_release);
  }
  while (flags->consumed.load(std::memory_order_acquire) < pieces) {
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::waitpid(reader, nullptr, 0);
  ::munmap(base, mapped);
  return static_cast<double>(pieces) * static_cast<double>(piece) / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t total = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  std::printf("piece,ordinary_gbps,streaming_gbps\n");
  for (std::size_t piece : {16u << 10, 64u << 10, 256u << 10, 1u << 20}) {
    double ordinary = measure(piece, total, false);
    double streaming = measure(piece, total, true);
    std::printf("%zu,%.2f,%.2f\n", piece, ordinary, streaming);
  }
  return 0;
}
