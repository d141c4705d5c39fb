// The collective *_perf benches, one source built once per collective (COMM_BENCH_COLLECTIVE
// names it): nccl-tests' sizes and columns through the shared harness. Sizes are the whole
// buffer as nccl-tests counts them: the all_gather output, the reduce_scatter input, the
// all_to_all send buffer, the gather/scatter buffer at the root (each rank's block is size/n).
//   commrun -n 2 build/bench/broadcast_perf -b 8 -e 256M -f 4 [-a ring|tree|...] [--csv]
// The check: every rank starts from values derived from its rank, so each output element is
// known exactly for float32/float64/int32/int64 (other dtypes report #wrong = -1, unchecked).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "harness.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using comm::Buffer;
using comm::DType;
using comm::ReduceOp;
using Bytes = std::vector<std::uint8_t>;

// Reads and writes element i as double, for the checked dtypes.
bool checkable(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Int32 || dtype == DType::Int64;
}
void put(Bytes& bytes, DType dtype, std::size_t i, double value) {
  switch (dtype) {
    case DType::Float32: {
      auto v = static_cast<float>(value);
      std::memcpy(&bytes[4 * i], &v, 4);
      break;
    }
    case DType::Float64: std::memcpy(&bytes[8 * i], &value, 8); break;
    case DType::Int32: {
      auto v = static_cast<std::int32_t>(value);
      std::memcpy(&bytes[4 * i], &v, 4);
      break;
    }
    case DType::Int64: {
      auto v = static_cast<std::int64_t>(value);
      std::memcpy(&bytes[8 * i], &v, 8);
      break;
    }
    default: break;
  }
}
double get(const Bytes& bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, &bytes[4 * i], 4);
      return v;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, &bytes[8 * i], 8);
      return v;
    }
    case DType::Int32: {
      std::int32_t v;
      std::memcpy(&v, &bytes[4 * i], 4);
      return v;
    }
    case DType::Int64: {
      std::int64_t v;
      std::memcpy(&v, &bytes[8 * i], 8);
      return static_cast<double>(v);
    }
    default: return 0;
  }
}

// What reducing the values 1..n gives (the check's inputs are rank + 1).
double reduced(ReduceOp op, int n) {
  switch (op) {
    case ReduceOp::Sum: return n * (n + 1) / 2.0;
    case ReduceOp::Max: return n;
    case ReduceOp::Min: return 1;
    default: return -1;  // not checked
  }
}

double bus_factor(comm::Collective collective, int n) {
  using comm::Collective;
  switch (collective) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::AllToAllV:
    case Collective::AllGatherV:
    case Collective::ReduceScatterV: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

struct Buffers {
  Bytes input, output;
  std::vector<std::size_t> input_counts, output_counts;  // all_to_all_v
  std::vector<Buffer> views;        // gather outputs
  std::vector<Buffer> const_views;  // scatter inputs
};

// The v-forms' counts, skewed as a mixture of experts' exchange often is: rank 0 brings 8
// blocks (count / size() elements each), the others one. Returns their total.
std::size_t skewed(std::vector<std::size_t>& counts, int n, std::size_t block) {
  counts.clear();
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts.push_back((r == 0 ? 8 : 1) * block);
    total += counts.back();
  }
  return total;
}

// Wrong elements of blocks packed in rank order, element i of rank s's block holding
// s * 1000 + i % 97 (-1: not checkable).
template <class WrongWhere>
long long wrong_in_blocks(const Bytes& bytes, const std::vector<std::size_t>& counts, const WrongWhere& wrong_where) {
  long long wrong = 0;
  std::size_t at = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    long long here = wrong_where(bytes, at, counts[s], [&](std::size_t i) {
      return static_cast<double>(s) * 1000.0 + static_cast<double>(i % 97);
    });
    if (here < 0) return -1;
    wrong += here;
    at += counts[s];
  }
  return wrong;
}

// Sets up buffers for one call and returns the call; `check` verifies after one run. `value`:
// the same call as a comm::Call, for the persistent rows (ProcessGroup::prepare), where given.
struct Plan {
  std::function<void()> call;
  std::function<long long()> check;
  std::optional<comm::Call> value{};
};

Plan plan(comm::Collective collective, comm::ProcessGroup& group, const comm::bench::BenchOptions& options,
          std::size_t count, bool in_place, std::string_view algorithm, Buffers& b) {
  using comm::Collective;
  int n = group.size(), rank = group.rank(), root = options.root;
  DType dtype = options.dtype;
  ReduceOp op = options.op;
  std::size_t element = comm::element_size(dtype);
  std::size_t block = count / static_cast<std::size_t>(n);  // per-rank elements of the split collectives
  auto fill = [dtype, element](Bytes& bytes, std::size_t elements, const std::function<double(std::size_t)>& value) {
    bytes.assign(std::max<std::size_t>(elements * element, 1), 0);
    if (checkable(dtype))
      for (std::size_t i = 0; i < elements; ++i) put(bytes, dtype, i, value(i));
  };
  auto wrong_where = [dtype](const Bytes& bytes, std::size_t first, std::size_t elements,
                             const std::function<double(std::size_t)>& want) -> long long {
    if (!checkable(dtype)) return -1;
    long long wrong = 0;
    for (std::size_t i = 0; i < elements; ++i) wrong += get(bytes, dtype, first + i) != want(i);
    return wrong;
  };
  double combined = reduced(op, n);
  bool reduction_checked = combined >= 0;
  switch (collective) {
    case Collective::AllReduce:
      fill(b.input, count, [&](std::size_t) { return rank + 1; });
      return {[=, &group, &b] { group.all_reduce(Buffer(b.input.data(), count, dtype), op, algorithm); },
              [=, &group, &b] {
                return reduction_checked ? wrong_where(b.input, 0, count, [&](std::size_t) { return combined; }) : -1;
              },
              comm::Call{.operation = comm::Operation::AllReduce,
                         .output = Buffer(b.input.data(), count, dtype),
                         .op = op,
                         .algorithm = algorithm}};
    case Collective::Broadcast:
      fill(b.input, count, [&](std::size_t i) { return rank == root ? static_cast<double>(i % 1000) : -1.0; });
      return {[=, &group, &b] { group.broadcast(Buffer(b.input.data(), count, dtype), root, algorithm); },
              [=, &group, &b] {
                return wrong_where(b.input, 0, count, [](std::size_t i) { return static_cast<double>(i % 1000); });
              }};
    case Collective::Reduce:
      fill(b.input, count, [&](std::size_t) { return rank + 1; });
      return {[=, &group, &b] { group.reduce(Buffer(b.input.data(), count, dtype), root, op, algorithm); },
              [=, &group, &b] {
                if (!reduction_checked) return -1LL;
                return rank == root ? wrong_where(b.input, 0, count, [&](std::size_t) { return combined; })
                                    : wrong_where(b.input, 0, count, [&](std::size_t) { return rank + 1.0; });
              }};
    case Collective::AllGather: {
      fill(b.output, block * n, [&](std::size_t) { return -1.0; });
      fill(b.input, block, [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 1000); });
      void* input = b.input.data();
      if (in_place) {
        std::memcpy(b.output.data() + static_cast<std::size_t>(rank) * block * element, b.input.data(),
                    block * element);
        input = b.output.data() + static_cast<std::size_t>(rank) * block * element;
      }
      return {[=, &group, &b] {
                group.all_gather(Buffer(b.output.data(), block * n, dtype), Buffer(input, block, dtype), algorithm);
              },
              [=, &group, &b] {
                return wrong_where(b.output, 0, block * n, [&](std::size_t i) {
                  return static_cast<double>(i / block) * 1000.0 + static_cast<double>((i % block) % 1000);
                });
              }};
    }
    case Collective::ReduceScatter: {
      fill(b.input, block * n, [&](std::size_t) { return rank + 1; });
      fill(b.output, block, [&](std::size_t) { return -1.0; });
      void* output = in_place ? b.input.data() + static_cast<std::size_t>(rank) * block * element : b.output.data();
      return {[=, &group, &b] {
                group.reduce_scatter(Buffer(output, block, dtype), Buffer(b.input.data(), block * n, dtype), op,
                                     algorithm);
              },
              [=, &group, &b] {
                if (!reduction_checked) return -1LL;
                std::size_t first = in_place ? static_cast<std::size_t>(rank) * block : 0;
                return wrong_where(in_place ? b.input : b.output, first, block, [&](std::size_t) { return combined; });
              }};
    }
    case Collective::AllToAll: {
      // Block r of rank s's input holds s * n + r; rank r's output block s must hold it.
      fill(b.input, block * n, [&](std::size_t i) { return rank * n + static_cast<double>(i / block); });
      fill(b.output, block * n, [&](std::size_t) { return -1.0; });
      Bytes* out = in_place ? &b.input : &b.output;
      return {[=, &group, &b] {
                group.all_to_all(Buffer(out->data(), block * n, dtype), Buffer(b.input.data(), block * n, dtype));
              },
              [=, &group, &b] {
                return wrong_where(*out, 0, block * n,
                                   [&](std::size_t i) { return static_cast<double>(i / block) * n + rank; });
              }};
    }
    case Collective::Gather: {
      fill(b.input, block, [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 1000); });
      fill(b.output, block * n, [&](std::size_t) { return -1.0; });
      b.views.clear();
      for (int r = 0; r < n; ++r)
        b.views.emplace_back(b.output.data() + static_cast<std::size_t>(r) * block * element, block, dtype);
      return {[=, &group, &b] { group.gather(Buffer(b.input.data(), block, dtype), b.views, root); },
              [=, &group, &b] {
                if (rank != root) return 0LL;
                return wrong_where(b.output, 0, block * n, [&](std::size_t i) {
                  return static_cast<double>(i / block) * 1000.0 + static_cast<double>((i % block) % 1000);
                });
              }};
    }
    case Collective::Scatter: {
      fill(b.input, block * n, [&](std::size_t i) {
        return static_cast<double>(i / block) * 1000.0 + static_cast<double>((i % block) % 1000);
      });
      fill(b.output, block, [&](std::size_t) { return -1.0; });
      b.const_views.clear();
      for (int r = 0; r < n; ++r)
        b.const_views.emplace_back(b.input.data() + static_cast<std::size_t>(r) * block * element, block, dtype);
      return {[=, &group, &b] { group.scatter(Buffer(b.output.data(), block, dtype), b.const_views, root); },
              [=, &group, &b] {
                return wrong_where(b.output, 0, block,
                                   [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 1000); });
              }};
    }
    case Collective::AllToAllV: {
      // Skewed as a mixture of experts' exchange often is: rank 0 sends 8 blocks' worth to each
      // rank, the others one block (count / size() elements) each. Element i of the block from
      // rank s to rank r holds s * 1000 + r + i % 97.
      auto heavy = [](int r) -> std::size_t { return r == 0 ? 8 : 1; };
      b.input_counts.assign(static_cast<std::size_t>(n), heavy(rank) * block);
      b.output_counts.clear();
      for (int s = 0; s < n; ++s) b.output_counts.push_back(heavy(s) * block);
      std::size_t sent = heavy(rank) * block * static_cast<std::size_t>(n);
      std::size_t received = (8 + static_cast<std::size_t>(n) - 1) * block;
      if (n == 1) received = sent;
      std::size_t mine = heavy(rank) * block;
      fill(b.input, sent, [&](std::size_t i) {  // called only when mine > 0
        return rank * 1000.0 + static_cast<double>(i / mine) + static_cast<double>((i % mine) % 97);
      });
      fill(b.output, received, [&](std::size_t) { return -1.0; });
      return {[=, &group, &b] {
                group.all_to_all_v(Buffer(b.output.data(), received, dtype), b.output_counts,
                                   Buffer(b.input.data(), sent, dtype), b.input_counts);
              },
              [=, &group, &b] {
                long long wrong = 0;
                std::size_t at = 0;
                for (int s = 0; s < n; ++s) {
                  std::size_t length = b.output_counts[static_cast<std::size_t>(s)];
                  wrong += wrong_where(b.output, at, length, [&](std::size_t i) {
                    return s * 1000.0 + rank + static_cast<double>(i % 97);
                  });
                  at += length;
                }
                return wrong;
              }};
    }
    case Collective::AllGatherV: {
      // Element i of rank s's block holds s * 1000 + i % 97.
      std::size_t total = skewed(b.output_counts, n, block), mine = b.output_counts[static_cast<std::size_t>(rank)];
      fill(b.input, mine, [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 97); });
      fill(b.output, total, [&](std::size_t) { return -1.0; });
      return {[=, &group, &b] {
                group.all_gather_v(Buffer(b.output.data(), total, dtype), Buffer(b.input.data(), mine, dtype),
                                   b.output_counts);
              },
              [=, &b] { return wrong_in_blocks(b.output, b.output_counts, wrong_where); }};
    }
    case Collective::GatherV: {
      std::size_t total = skewed(b.output_counts, n, block), mine = b.output_counts[static_cast<std::size_t>(rank)];
      fill(b.input, mine, [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 97); });
      fill(b.output, total, [&](std::size_t) { return -1.0; });
      return {[=, &group, &b] {
                group.gather_v(Buffer(b.output.data(), total, dtype), Buffer(b.input.data(), mine, dtype),
                               b.output_counts, root);
              },
              [=, &b] { return rank == root ? wrong_in_blocks(b.output, b.output_counts, wrong_where) : 0LL; }};
    }
    case Collective::ScatterV: {
      // Block r of root's input holds r * 1000 + i % 97.
      std::size_t total = skewed(b.input_counts, n, block), mine = b.input_counts[static_cast<std::size_t>(rank)];
      std::vector<std::size_t> ends;  // of each rank's block
      for (std::size_t count_of_rank : b.input_counts) ends.push_back((ends.empty() ? 0 : ends.back()) + count_of_rank);
      fill(b.input, total, [&](std::size_t i) {
        auto r = static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), i) - ends.begin());
        return static_cast<double>(r) * 1000.0 + static_cast<double>((i - (ends[r] - b.input_counts[r])) % 97);
      });
      fill(b.output, mine, [&](std::size_t) { return -1.0; });
      return {[=, &group, &b] {
                group.scatter_v(Buffer(b.output.data(), mine, dtype), Buffer(b.input.data(), total, dtype),
                                b.input_counts, root);
              },
              [=, &b] {
                return wrong_where(b.output, 0, mine,
                                   [&](std::size_t i) { return rank * 1000.0 + static_cast<double>(i % 97); });
              }};
    }
    case Collective::ReduceScatterV: {
      std::size_t total = skewed(b.input_counts, n, block), mine = b.input_counts[static_cast<std::size_t>(rank)];
      fill(b.input, total, [&](std::size_t) { return rank + 1; });
      fill(b.output, mine, [&](std::size_t) { return -1.0; });
      return {[=, &group, &b] {
                group.reduce_scatter_v(Buffer(b.output.data(), mine, dtype), Buffer(b.input.data(), total, dtype),
                                       b.input_counts, op);
              },
              [=, &b] {
                if (!reduction_checked) return -1LL;
                return wrong_where(b.output, 0, mine, [&](std::size_t) { return combined; });
              }};
    }
    case Collective::Barrier:
      return {[&group] { group.barrier(); }, [] { return 0LL; }, comm::Call{.operation = comm::Operation::Barrier}};
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using comm::Collective;
  const std::string name = COMM_BENCH_COLLECTIVE;
  Collective collective = Collective::AllReduce;
  // Every collective by its name (the barrier is the enum's last).
  for (int value = 0; value <= static_cast<int>(Collective::Barrier); ++value) {
    auto candidate = static_cast<Collective>(value);
    if (name == comm::to_string(candidate)) collective = candidate;
  }
  // The three whose one buffer is read and written; every other but the barrier splits its data
  // into a block per rank. The v-forms and gather/scatter run out of place only.
  bool one_buffer = collective == Collective::Broadcast || collective == Collective::Reduce ||
                    collective == Collective::AllReduce;
  bool has_in_place = one_buffer || collective == Collective::AllGather || collective == Collective::ReduceScatter ||
                      collective == Collective::AllToAll;
  bool has_out_of_place = !one_buffer;

  comm::bench::BenchDescriptor bench;
  bench.name = name + "_perf";
  bench.run = [&](const comm::bench::BenchContext& context) -> std::vector<comm::bench::Measurement> {
    auto& group = context.group;
    const auto& options = context.options;
    int n = group.size();
    std::string_view requested = options.algorithm;  // a name the group checks (algorithm_for)
    std::size_t split = one_buffer || collective == Collective::Barrier ? 1 : static_cast<std::size_t>(n);
    std::size_t count = context.count / split * split;  // whole blocks only
    std::size_t per_rank_bytes = count * comm::element_size(options.dtype) / split;
    const char* used = group.algorithm_for(collective, per_rank_bytes, requested);
    std::vector<comm::bench::Measurement> rows;
    // Rows: out of place, in place, and, asked for by name (its CSV rows look like in-place
    // ones), the in-place call prepared once and run each iteration (all_reduce, barrier).
    for (std::string_view mode : {"out-place", "in-place", "persistent"}) {
      bool persistent = mode == "persistent";
      bool in_place = mode != "out-place";
      if ((in_place && !has_in_place && collective != Collective::Barrier) || (!in_place && !has_out_of_place)) continue;
      if (collective == Collective::Barrier && mode == "in-place") continue;
      if (persistent ? options.mode != mode : !options.runs(mode)) continue;
      comm::bench::Measurement row{
          name,     used,
          in_place, collective == Collective::Barrier ? 0 : count * comm::element_size(options.dtype),
          {},       bus_factor(collective, n),
          1.0,      -1};
      Buffers buffers;
      Plan run = plan(collective, group, options, count, in_place, requested, buffers);
      if (persistent) {
        if (!run.value) continue;
        row.mode = "persistent";
        auto prepared = group.prepare(*run.value);
        run.call = [prepared] { prepared->run(); };
      }
      if (options.check) {
        run.call();
        long long wrong = run.check();
        // Every rank checks; rank 0 reports the total.
        std::vector<std::int64_t> total{wrong < 0 ? 0 : wrong, wrong < 0 ? 1 : 0};
        group.all_reduce(total);
        row.wrong = total[1] > 0 ? -1 : total[0];
      }
      for (int i = 0; i < options.warmup; ++i) run.call();
      for (int i = 0; i < context.iterations; ++i) {
        auto start = Clock::now();
        run.call();
        row.times_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      rows.push_back(std::move(row));
    }
    return rows;
  };
  return comm::bench::run_bench(argc, argv, bench);
}
