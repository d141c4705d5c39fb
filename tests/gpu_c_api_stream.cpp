// The C API on device buffers keeps NCCL's stream order: a kernel queued on the caller's stream
// just before the call writes the input, one queued just after reads the output, with no
// synchronisation between, on a non-blocking stream (as torch's ProcessGroupNCCL uses its own).
// all_reduce in and out of place, all_gather, broadcast, and a grouped send/recv ring. Before
// 2026-12-04 a call returned once handed to the group's queue, with nothing on the stream yet:
// the reading kernel ran first (torch under the drop-in read its inputs back, world 1 and 2).
//   commrun -n 2 build/tests/gpu_c_api_stream      exit 0: all correct, 1: wrong, 77: no GPU
#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/types.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"

namespace cuda = comm::cuda;
using comm::DType;
using comm::ReduceOp;

namespace {

constexpr int kDevice = 0;  // every rank on the one GPU

int failures = 0;

void expect(comm_result_t result, const char* what, comm_t comm) {
  if (result == COMM_SUCCESS) return;
  std::fprintf(stderr, "FAIL %s: %s (%s)\n", what, comm_get_error_string(result), comm_get_last_error(comm));
  ++failures;
}

// Device memory of `count` floats holding `value`.
struct Floats {
  cuda::DeviceMemory memory;
  std::size_t count;
  Floats(std::size_t count, float value) : memory(count * sizeof(float), kDevice), count(count) {
    std::vector<float> values(count, value);
    cuda::copy(memory.data(), values.data(), count * sizeof(float), kDevice);
  }
  float* data() const { return static_cast<float*>(memory.data()); }
};

// out = a + b on the stream: the kernels that write an input just before a call and read its
// output just after.
void add(const Floats& out, const Floats& a, const Floats& b, std::size_t count, const cuda::Stream& stream) {
  cuda::reduce(out.data(), a.data(), b.data(), count, DType::Float32, ReduceOp::Sum, kDevice, stream.handle());
}

// Checks that `count` floats at `data` + `first` hold `want(i)`, after the stream has run.
template <class Want>
void check(const std::string& what, const Floats& data, std::size_t first, std::size_t count, Want want,
           const cuda::Stream& stream) {
  stream.synchronize();
  std::vector<float> values(count);
  cuda::copy(values.data(), data.data() + first, count * sizeof(float), kDevice);
  std::size_t wrong = 0;
  float seen = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (values[i] != want(i)) {
      if (wrong++ == 0) seen = values[i];
    }
  }
  if (wrong != 0) {
    std::fprintf(stderr, "FAIL %s: %zu of %zu wrong (first: %g, not %g)\n", what.c_str(), wrong, count, seen,
                 static_cast<double>(want(0)));
    ++failures;
  }
}

}  // namespace

int main() {
  auto status = cuda::device_status();
  if (status.device_count == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
    return 77;
  }
  comm_t comm = nullptr;
  if (comm_init_from_environment(&comm, nullptr) != COMM_SUCCESS) {
    std::fprintf(stderr, "comm_init_from_environment: %s\n", comm_get_last_error(nullptr));
    return 1;
  }
  int rank = 0, size = 0;
  comm_user_rank(comm, &rank);
  comm_count(comm, &size);
  cuda::Stream stream(kDevice);
  void* s = stream.handle();
  // Large enough that the reading kernel, queued at once, would finish before the call's work
  // if the call had not put its work on the stream before returning.
  const std::size_t count = std::size_t{1} << 22;
  const auto n = static_cast<std::size_t>(size);
  const float ranks_sum = static_cast<float>(size * (size - 1) / 2);
  Floats ones(count * n, 1.0f), out(count * n, 0.0f);

  for (int round = 0; round < 3; ++round) {
    std::string at = " (round " + std::to_string(round) + ")";
    {  // in place: (rank + 1) summed, read back + 1
      Floats data(count, static_cast<float>(rank));
      add(data, data, ones, count, stream);
      expect(comm_all_reduce(data.data(), data.data(), count, COMM_FLOAT32, COMM_SUM, comm, s), "all_reduce", comm);
      add(out, data, ones, count, stream);
      check("all_reduce in place" + at, out, 0, count, [&](std::size_t) { return ranks_sum + size + 1; }, stream);
    }
    {  // out of place: the copy of the input into the output is ordered too
      Floats input(count, static_cast<float>(rank)), output(count, -1.0f);
      add(input, input, ones, count, stream);
      expect(comm_all_reduce(input.data(), output.data(), count, COMM_FLOAT32, COMM_SUM, comm, s), "all_reduce", comm);
      add(out, output, ones, count, stream);
      check("all_reduce out of place" + at, out, 0, count, [&](std::size_t) { return ranks_sum + size + 1; }, stream);
    }
    {  // all_gather: block r holds r + 1, read back + 1
      Floats input(count, static_cast<float>(rank)), gathered(count * n, -1.0f);
      add(input, input, ones, count, stream);
      expect(comm_all_gather(input.data(), gathered.data(), count, COMM_FLOAT32, comm, s), "all_gather", comm);
      add(out, gathered, ones, count * n, stream);
      check("all_gather" + at, out, 0, count * n, [&](std::size_t i) { return static_cast<float>(i / count + 2); },
            stream);
    }
    {  // broadcast from the last rank
      int root = size - 1;
      Floats data(count, static_cast<float>(rank));
      add(data, data, ones, count, stream);
      expect(comm_broadcast(data.data(), data.data(), count, COMM_FLOAT32, root, comm, s), "broadcast", comm);
      add(out, data, ones, count, stream);
      check("broadcast" + at, out, 0, count, [&](std::size_t) { return static_cast<float>(root + 2); }, stream);
    }
    {  // a ring of sends and receives in one group
      int right = (rank + 1) % size, left = (rank + size - 1) % size;
      Floats mine(count, static_cast<float>(rank)), received(count, -1.0f);
      add(mine, mine, ones, count, stream);
      expect(comm_group_start(), "group_start", comm);
      expect(comm_send(mine.data(), count, COMM_FLOAT32, right, comm, s), "send", comm);
      expect(comm_recv(received.data(), count, COMM_FLOAT32, left, comm, s), "recv", comm);
      expect(comm_group_end(), "group_end", comm);
      add(out, received, ones, count, stream);
      check("send/recv ring" + at, out, 0, count, [&](std::size_t) { return static_cast<float>(left + 2); }, stream);
    }
  }
  int total = failures, everyone = 0;
  expect(comm_all_reduce(&total, &everyone, 1, COMM_INT32, COMM_SUM, comm, nullptr), "all_reduce of failures", comm);
  comm_destroy(comm);
  if (rank == 0) std::printf("C API stream order, %d ranks: %d failures\n", size, everyone);
  return everyone == 0 ? 0 : 1;
}
