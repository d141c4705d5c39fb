#include "harness.hpp"

#include <getopt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace comm::bench {
namespace {

constexpr const char* kUsage = R"(options (nccl-tests style):
  -b BYTES   smallest size (default 8; K, M, G suffixes)   -e BYTES  largest size (default 256M)
  -f FACTOR  size multiplication factor (default 2)        -n ITERS  timed iterations (default: by size)
  -w ITERS   warm-up iterations (default 5)                -c 0|1    check results (default 1)
  -d DTYPE   int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64 bool (default float32)
  -o OP      sum prod min max avg band bor bxor (default sum)
  -r ROOT    root rank (default 0)                         -a ALGO   algorithm (default auto)
  --csv      one CSV header and a row per size and mode, from rank 0 only
  --mode M   only that mode's rows: in-place, out-place, persistent (only by name:
             all_reduce's and barrier's call prepared once);
             sendrecv_perf's pingpong, sendrecv, exchange
)";

[[noreturn]] void usage(const std::string& program, const std::string& problem) {
  std::fprintf(stderr, "%s: %s\n%s", program.c_str(), problem.c_str(), kUsage);
  std::exit(2);
}

std::size_t parse_bytes(const std::string& program, const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  std::string suffix = end;
  double scale = 1;
  if (suffix == "K" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M" || suffix == "m")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    usage(program, std::string("bad size '") + text + "'");
  if (end == text || value < 0) usage(program, std::string("bad size '") + text + "'");
  return static_cast<std::size_t>(value * scale);
}

DType parse_dtype(const std::string& program, const std::string& text) {
  for (DType dtype : {DType::Int8, DType::UInt8, DType::Int32, DType::UInt32, DType::Int64, DType::UInt64,
                      DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Bool}) {
    if (text == to_string(dtype)) return dtype;
  }
  usage(program, "unknown dtype '" + text + "'");
}

ReduceOp parse_op(const std::string& program, const std::string& text) {
  if (text == "prod") return ReduceOp::Product;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg, ReduceOp::BAnd,
                      ReduceOp::BOr, ReduceOp::BXor}) {
    if (text == to_string(op)) return op;
  }
  usage(program, "unknown op '" + text + "'");
}

BenchOptions parse(int argc, char** argv) {
  BenchOptions options;
  std::string program = argv[0];
  static constexpr option kLongOptions[] = {
      {"csv", no_argument, nullptr, 'C'}, {"mode", required_argument, nullptr, 'M'},
      {"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
  opterr = 0;  // the messages are the bench's own
  for (;;) {
    int previous = optind;
    int flag = ::getopt_long(argc, argv, ":hb:e:f:n:w:c:d:o:r:a:", kLongOptions, nullptr);
    if (flag == -1) break;
    const char* value = optarg;
    switch (flag) {
      case 'C': options.csv = true; break;
      case 'h': std::fputs(kUsage, stdout); std::exit(0);
      case 'b': options.min_bytes = parse_bytes(program, value); break;
      case 'e': options.max_bytes = parse_bytes(program, value); break;
      case 'f': options.factor = std::atof(value); break;
      case 'n': options.iterations = std::atoi(value); break;
      case 'w': options.warmup = std::atoi(value); break;
      case 'c': options.check = std::atoi(value) != 0; break;
      case 'd': options.dtype = parse_dtype(program, value); break;
      case 'o': options.op = parse_op(program, value); break;
      case 'r': options.root = std::atoi(value); break;
      case 'a': options.algorithm = value; break;
      case 'M': options.mode = value; break;
      case ':': usage(program, "missing value for " + std::string(argv[previous]));
      default: usage(program, "unknown flag " + std::string(argv[previous]));
    }
  }
  if (optind < argc) usage(program, "unknown flag " + std::string(argv[optind]));
  if (options.factor <= 1.0) usage(program, "-f must be above 1");
  if (options.min_bytes > options.max_bytes) usage(program, "-b is larger than -e");
  return options;
}

int default_iterations(std::size_t bytes) {
  if (bytes <= 64 * 1024) return 1000;
  if (bytes <= (1u << 20)) return 200;
  if (bytes <= (16u << 20)) return 40;
  return 10;
}

void print_header(const BenchDescriptor& bench, const ProcessGroup& group, const BenchOptions& options) {
  if (options.csv) {
    std::printf(
        "collective,transport,algo,ranks,bytes,count,dtype,op,root,inplace,time_us_p50,time_us_p99,"
        "algbw_gbps,busbw_gbps,wrong\n");
    return;
  }
  std::printf("# %s: %d ranks over %s\n", bench.name.c_str(), group.size(), group.transport_name());
  std::printf("# %12s %12s %9s %6s %5s %10s %11s %10s %10s %10s %7s  %s\n", "size", "count", "type", "redop", "root",
              "mode", "time(us)p50", "p99(us)", "algbw", "busbw", "#wrong", "algo");
}

void print_row(const Measurement& row, const ProcessGroup& group, const BenchContext& context) {
  const auto& options = context.options;
  double p50 = percentile(row.times_us, 0.5), p99 = percentile(row.times_us, 0.99);
  double algbw = p50 > 0 ? static_cast<double>(row.bytes) * row.bytes_factor / (p50 * 1e3) : 0;  // GB/s
  double busbw = algbw * row.bus_factor;
  if (options.csv) {
    std::printf("%s,%s,%s,%d,%zu,%zu,%s,%s,%d,%d,%.2f,%.2f,%.3f,%.3f,%lld\n", row.collective.c_str(),
                group.transport_name(), row.algorithm.c_str(), group.size(), row.bytes, context.count,
                to_string(options.dtype), to_string(options.op), options.root, row.in_place ? 1 : 0, p50, p99, algbw,
                busbw, row.wrong);
  } else {
    const char* mode = !row.mode.empty() ? row.mode.c_str() : row.in_place ? "in-place" : "out-place";
    std::printf("  %12zu %12zu %9s %6s %5d %10s %11.2f %10.2f %10.3f %10.3f %7lld  %s\n", row.bytes, context.count,
                to_string(options.dtype), to_string(options.op), options.root, mode, p50, p99, algbw, busbw, row.wrong,
                row.algorithm.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  auto at = static_cast<std::size_t>(std::lround(fraction * static_cast<double>(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

int run_bench(int argc, char** argv, const BenchDescriptor& bench) {
  BenchOptions options = parse(argc, argv);
  try {
    auto group = init_process_group();
    if (group->size() < bench.min_ranks) {
      if (group->rank() == 0) {
        std::fprintf(stderr, "%s needs at least %d ranks; start it with commrun -n %d\n", bench.name.c_str(),
                     bench.min_ranks, bench.min_ranks);
      }
      return 2;
    }
    if (group->rank() == 0) print_header(bench, *group, options);
    long long wrong = 0;
    std::size_t element = element_size(options.dtype);
    for (double size = static_cast<double>(options.min_bytes); size <= static_cast<double>(options.max_bytes) * 1.0001;
         size = std::max(size * options.factor, size + 1)) {
      std::size_t count = static_cast<std::size_t>(size) / element;
      std::size_t bytes = count * element;
      int iterations = options.iterations > 0 ? options.iterations : default_iterations(bytes);
      BenchContext context{*group, options, bytes, count, iterations};
      for (const auto& row : bench.run(context)) {
        if (row.wrong > 0) wrong += row.wrong;  // -1: not checked
        if (group->rank() == 0) print_row(row, *group, context);
      }
      if (size == 0) break;
    }
    return wrong == 0 ? 0 : 1;
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: %s\n", bench.name.c_str(), error.what());
    return 1;
  }
}

}  // namespace comm::bench
