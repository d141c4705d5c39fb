// all_reduce_perf: in-place all_reduce per size, nccl-tests columns (busbw = algbw * 2(n-1)/n).
//   commrun -n 2 build/bench/all_reduce_perf -b 8 -e 256M -f 4
// Each rank starts from the value rank + 1 in every element, so the reduced value is known
// exactly; #wrong counts elements that differ (float32, float64, int32, int64 and the Sum, Max
// and Min ops are checked; other combinations report -1: not checked).
#include <chrono>
#include <cstring>

#include "harness.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class T>
void fill(std::vector<std::uint8_t>& bytes, std::size_t count, T value) {
  auto* data = reinterpret_cast<T*>(bytes.data());
  for (std::size_t i = 0; i < count; ++i) data[i] = value;
}

template <class T>
long long count_wrong(const std::vector<std::uint8_t>& bytes, std::size_t count, T expected) {
  const auto* data = reinterpret_cast<const T*>(bytes.data());
  long long wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += data[i] != expected;
  return wrong;
}

// Runs `action` with the element type of dtype, for the types the check knows.
template <class Action>
bool with_checked_type(comm::DType dtype, Action&& action) {
  switch (dtype) {
    case comm::DType::Float32: action(float{}); return true;
    case comm::DType::Float64: action(double{}); return true;
    case comm::DType::Int32: action(std::int32_t{}); return true;
    case comm::DType::Int64: action(std::int64_t{}); return true;
    default: return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  comm::bench::BenchDescriptor bench;
  bench.name = "all_reduce_perf";
  bench.run = [](const comm::bench::BenchContext& context) -> std::vector<comm::bench::Measurement> {
    auto& group = context.group;
    const auto& options = context.options;
    int n = group.size();
    comm::bench::Measurement row{"all_reduce", "ring", true, context.bytes, {}, 2.0 * (n - 1) / n, 1.0, 0};
    std::vector<std::uint8_t> bytes(std::max<std::size_t>(context.bytes, 1));
    comm::Buffer buffer(bytes.data(), context.count, options.dtype);
    bool checkable = options.op == comm::ReduceOp::Sum || options.op == comm::ReduceOp::Max || options.op == comm::ReduceOp::Min;
    long long wrong = -1;
    if (options.check && checkable) {
      with_checked_type(options.dtype, [&]<class T>(T) {
        fill<T>(bytes, context.count, static_cast<T>(group.rank() + 1));
        group.all_reduce(buffer, options.op);
        T expected = options.op == comm::ReduceOp::Sum ? static_cast<T>(n * (n + 1) / 2)
                     : options.op == comm::ReduceOp::Max ? static_cast<T>(n) : static_cast<T>(1);
        wrong = count_wrong<T>(bytes, context.count, expected);
      });
    }
    for (int i = 0; i < options.warmup; ++i) group.all_reduce(buffer, options.op);
    for (int i = 0; i < context.iterations; ++i) {
      auto start = Clock::now();
      group.all_reduce(buffer, options.op);
      row.times_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    row.wrong = wrong < 0 ? -1 : wrong;
    return {row};
  };
  return comm::bench::run_bench(argc, argv, bench);
}
