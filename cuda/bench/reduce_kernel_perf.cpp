// reduce_kernel_perf: the bandwidth of the CUDA reduction kernels against the copies they are
// judged by, in one run on one GPU. A reduction out = a op b moves 3 bytes per byte of output
// (two reads, one write); a device-to-device copy moves 2 (one read, one write); a host<->device
// copy is counted once. Each figure is the median of --repeats samples, a sample timing a batch
// of back-to-back operations on one stream (so launch and synchronisation costs fade out).
//
//   reduce_kernel_perf [--bytes N] [--repeats N] [--batch N] [--csv]
// Exits 77 (skipped) without a usable GPU, like the GPU tests.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/types.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/reduce.hpp"

namespace cuda = comm::cuda;
using comm::DType;
using comm::ReduceOp;

namespace {

struct Options {
  std::size_t bytes = 256u << 20;
  int repeats = 15;
  int batch = 10;
  bool csv = false;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", flag.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (flag == "--bytes")
      options.bytes = std::strtoull(value(), nullptr, 10);
    else if (flag == "--repeats")
      options.repeats = std::atoi(value());
    else if (flag == "--batch")
      options.batch = std::atoi(value());
    else if (flag == "--csv")
      options.csv = true;
    else {
      std::fprintf(stderr, "usage: reduce_kernel_perf [--bytes N] [--repeats N] [--batch N] [--csv]\n");
      std::exit(2);
    }
  }
  return options;
}

// Median seconds per operation.
double time_operation(const Options& options, const cuda::Stream& stream, const std::function<void()>& operation) {
  for (int i = 0; i < 3; ++i) operation();  // warm-up
  stream.synchronize();
  std::vector<double> samples;
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.batch; ++i) operation();
    stream.synchronize();
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    samples.push_back(elapsed.count() / options.batch);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  auto status = cuda::device_status();
  if (status.device_count == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", status.reason.c_str());
    return 77;
  }
  const int device = 0;
  cuda::Stream stream(device);
  cuda::DeviceMemory a(options.bytes, device), b(options.bytes, device), out(options.bytes, device);
  cuda::PinnedMemory host(options.bytes);
  cuda::fill(a.data(), 0x3c, options.bytes, device);  // small finite values in every float type
  cuda::fill(b.data(), 0x3b, options.bytes, device);
  double gigabytes = static_cast<double>(options.bytes) / 1e9;

  struct Row {
    std::string name;
    double seconds;
    double moved;  // bytes moved per operation, in multiples of --bytes
  };
  std::vector<Row> rows;
  auto measure = [&](std::string name, double moved, const std::function<void()>& operation) {
    rows.push_back({std::move(name), time_operation(options, stream, operation), moved});
  };
  measure("copy device->device", 2,
          [&] { cuda::copy_async(out.data(), a.data(), options.bytes, device, stream.handle()); });
  measure("copy host->device (pinned)", 1,
          [&] { cuda::copy_async(a.data(), host.data(), options.bytes, device, stream.handle()); });
  measure("copy device->host (pinned)", 1,
          [&] { cuda::copy_async(host.data(), a.data(), options.bytes, device, stream.handle()); });
  cuda::fill(a.data(), 0x3c, options.bytes, device);
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64, DType::Int32, DType::Int8}) {
    std::size_t count = options.bytes / comm::element_size(dtype);
    std::string type = comm::to_string(dtype);
    measure("reduce " + type + " sum out-of-place", 3, [&] {
      cuda::reduce(out.data(), a.data(), b.data(), count, dtype, ReduceOp::Sum, device, stream.handle());
    });
    measure("reduce " + type + " sum in-place", 3,
            [&] { cuda::reduce(a.data(), a.data(), b.data(), count, dtype, ReduceOp::Sum, device, stream.handle()); });
    cuda::fill(a.data(), 0x3c, options.bytes, device);
  }
  measure("reduce float32 max out-of-place", 3, [&] {
    cuda::reduce(out.data(), a.data(), b.data(), options.bytes / 4, DType::Float32, ReduceOp::Max, device,
                 stream.handle());
  });

  double copy_bandwidth = rows[0].moved * gigabytes / rows[0].seconds;
  if (options.csv)
    std::printf("name,bytes,time_us,bandwidth_gbps,ratio_to_device_copy\n");
  else
    std::printf("# %zu bytes per buffer, median of %d samples of %d operations\n# %-36s %10s %12s %9s\n", options.bytes,
                options.repeats, options.batch, "operation", "time(us)", "bw(GB/s)", "vs copy");
  for (const Row& row : rows) {
    double bandwidth = row.moved * gigabytes / row.seconds;
    if (options.csv)
      std::printf("%s,%zu,%.2f,%.1f,%.3f\n", row.name.c_str(), options.bytes, row.seconds * 1e6, bandwidth,
                  bandwidth / copy_bandwidth);
    else
      std::printf("  %-36s %10.2f %12.1f %8.1f%%\n", row.name.c_str(), row.seconds * 1e6, bandwidth,
                  100 * bandwidth / copy_bandwidth);
  }
  return 0;
}
