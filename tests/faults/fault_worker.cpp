// comm-fault-worker: one rank of a fault-injection case (tests/faults/run_faults.py starts the
// ranks directly, as torchrun would, with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
//
//   comm-fault-worker SEED OPS [--die-at-key SUFFIX --die-rank R [--die-occurrence N]]
//                     [--mismatch-at K --mismatch-rank R --mismatch-kind count|dtype|op|root|collective]
//                     [--stop-file PATH] [--no-final-barrier 1]
// --stop-file: run until PATH exists (rank 0 looks every 20 operations and tells the others).
//
// Every rank makes the world group and a subgroup of the even ranks, then runs OPS collectives
// chosen by SEED (the same sequence on every rank), checking each result against a reference
// computed here in float64. Output lines, for the driver:
//   ready                          init is done
//   dying at <ms>                  this rank kills itself now (--die-at-key)
//   ERROR <code> peer <p> at <ms>: <what>    a collective or the set-up failed (exit 10)
//   WRONG <op> #<i>: <detail>       a result differs from the reference (exit 20)
//   DONE <ops> hwm_kb <kb>         every operation succeeded (exit 0)
// <ms> is CLOCK_REALTIME in milliseconds, comparable between processes.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "tests/support/dying_store.hpp"

namespace {

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

long peak_resident_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

struct Options {
  std::uint64_t seed = 1;
  int ops = 100;
  std::string die_at_key;
  int die_rank = -1;
  int mismatch_at = -1;
  int mismatch_rank = -1;
  std::string mismatch_kind;
  int die_occurrence = 1;
  std::string stop_file;
  bool final_barrier = true;
};

struct Wrong {
  std::string detail;
};

template <class T>
void expect_equal(const std::vector<T>& got, const std::vector<double>& want, const char* what, int op) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (static_cast<double>(got[i]) != want[i]) {
      throw Wrong{std::string(what) + " #" + std::to_string(op) + ": element " + std::to_string(i) + " is " +
                  std::to_string(static_cast<double>(got[i])) + ", expected " + std::to_string(want[i])};
    }
  }
}

class Worker {
 public:
  Worker(const Options& options, std::shared_ptr<comm::ProcessGroup> world, std::shared_ptr<comm::ProcessGroup> evens)
      : options_(options), world_(std::move(world)), evens_(std::move(evens)) {
    n_ = world_->size();
    me_ = world_->rank();
  }

  void run_operation(int op) {
    std::mt19937_64 random(options_.seed * 1000003 + static_cast<std::uint64_t>(op));
    static const std::size_t kCounts[] = {1, 7, 1000, 65536, 262144};
    std::size_t count = kCounts[random() % 5];
    int kind = static_cast<int>(random() % 8);
    bool mismatched = op == options_.mismatch_at && me_ == options_.mismatch_rank;
    if (op == options_.mismatch_at) kind = options_.mismatch_kind == "root" ? 2 : 0;
    switch (kind) {
      case 0: return sum_float(op, count, mismatched);
      case 1: return max_int(op, count);
      case 2: return broadcast(op, count, static_cast<int>(random() % static_cast<std::uint64_t>(n_)), mismatched);
      case 3: return all_gather(op, std::min<std::size_t>(count, 16384));
      case 4: return reduce_scatter(op, std::min<std::size_t>(count, 16384));
      case 5: return world_->barrier();
      case 6: return subgroup_sum(op, count);
      default: return all_to_all(op, std::min<std::size_t>(count, 4096));
    }
  }

 private:
  void sum_float(int op, std::size_t count, bool mismatched) {
    const std::string& how = options_.mismatch_kind;
    if (mismatched && how == "count") ++count;
    if (mismatched && how == "dtype") {
      std::vector<double> data(count, 1.0);
      return world_->all_reduce(comm::Buffer(data.data(), count, comm::DType::Float64));
    }
    if (mismatched && how == "collective") {
      std::vector<float> data(count, 1.0f);
      return world_->broadcast(comm::Buffer(data.data(), count, comm::DType::Float32), 0);
    }
    std::vector<float> data(count);
    std::vector<double> want(count);
    double ranks_sum = n_ * (n_ + 1) / 2.0;
    for (std::size_t i = 0; i < count; ++i) {
      double pattern = static_cast<double>(i % 13 + static_cast<std::size_t>(op) % 5);
      data[i] = static_cast<float>((me_ + 1) * pattern);
      want[i] = ranks_sum * pattern;
    }
    auto reduce_op = mismatched && how == "op" ? comm::ReduceOp::Max : comm::ReduceOp::Sum;
    world_->all_reduce(comm::Buffer(data.data(), count, comm::DType::Float32), reduce_op);
    if (!mismatched) expect_equal(data, want, "all_reduce(sum, float32)", op);
  }

  void max_int(int op, std::size_t count) {
    std::vector<std::int32_t> data(count);
    std::vector<double> want(count);
    for (std::size_t i = 0; i < count; ++i) {
      data[i] = me_ * 7 + static_cast<std::int32_t>(i % 3);
      want[i] = (n_ - 1) * 7 + static_cast<double>(i % 3);
    }
    world_->all_reduce(comm::Buffer(data.data(), count, comm::DType::Int32), comm::ReduceOp::Max);
    expect_equal(data, want, "all_reduce(max, int32)", op);
  }

  void broadcast(int op, std::size_t count, int root, bool mismatched) {
    std::vector<double> data(count, -1.0), want(count);
    for (std::size_t i = 0; i < count; ++i) want[i] = op + 0.5 * static_cast<double>(i);
    if (me_ == root) data = want;
    world_->broadcast(comm::Buffer(data.data(), count, comm::DType::Float64), mismatched ? (root + 1) % n_ : root);
    // A rank that took itself for the root has its own data, rightly, and learns of the
    // mismatch in its next call; the others must not return from this one.
    if (!mismatched) expect_equal(data, want, "broadcast(float64)", op);
  }

  void all_gather(int op, std::size_t count) {
    std::vector<std::int32_t> input(count), output(count * static_cast<std::size_t>(n_), -1);
    std::vector<double> want(output.size());
    for (std::size_t i = 0; i < count; ++i) input[i] = me_ * 100000 + static_cast<std::int32_t>(i);
    for (int r = 0; r < n_; ++r) {
      for (std::size_t i = 0; i < count; ++i) want[static_cast<std::size_t>(r) * count + i] = r * 100000.0 + i;
    }
    world_->all_gather(comm::Buffer(output.data(), output.size(), comm::DType::Int32),
                       comm::Buffer(input.data(), count, comm::DType::Int32));
    expect_equal(output, want, "all_gather(int32)", op);
  }

  void reduce_scatter(int op, std::size_t count) {
    std::vector<float> input(count * static_cast<std::size_t>(n_)), output(count, -1.0f);
    std::vector<double> want(count);
    for (std::size_t j = 0; j < input.size(); ++j) input[j] = static_cast<float>((me_ + 1) * (j % 7));
    double ranks_sum = n_ * (n_ + 1) / 2.0;
    for (std::size_t i = 0; i < count; ++i) {
      want[i] = ranks_sum * static_cast<double>((static_cast<std::size_t>(me_) * count + i) % 7);
    }
    world_->reduce_scatter(comm::Buffer(output.data(), count, comm::DType::Float32),
                           comm::Buffer(input.data(), input.size(), comm::DType::Float32));
    expect_equal(output, want, "reduce_scatter(sum, float32)", op);
  }

  void subgroup_sum(int op, std::size_t count) {
    if (evens_->rank() < 0) return;  // odd ranks are not in it
    std::vector<std::int64_t> data(count, me_ + 1);
    double members_sum = 0;
    for (int r = 0; r < n_; r += 2) members_sum += r + 1;
    std::vector<double> want(count, members_sum);
    evens_->all_reduce(comm::Buffer(data.data(), count, comm::DType::Int64));
    expect_equal(data, want, "subgroup all_reduce(sum, int64)", op);
  }

  void all_to_all(int op, std::size_t count) {
    auto total = count * static_cast<std::size_t>(n_);
    std::vector<std::int32_t> input(total), output(total, -1);
    std::vector<double> want(total);
    for (int peer = 0; peer < n_; ++peer) {
      for (std::size_t i = 0; i < count; ++i) {
        auto at = static_cast<std::size_t>(peer) * count + i;
        input[at] = me_ * 100000 + peer * 1000 + static_cast<std::int32_t>(i % 1000);
        want[at] = peer * 100000.0 + me_ * 1000.0 + static_cast<double>(i % 1000);
      }
    }
    world_->all_to_all(comm::Buffer(output.data(), total, comm::DType::Int32),
                       comm::Buffer(input.data(), total, comm::DType::Int32));
    expect_equal(output, want, "all_to_all(int32)", op);
  }

  Options options_;
  std::shared_ptr<comm::ProcessGroup> world_;
  std::shared_ptr<comm::ProcessGroup> evens_;
  int n_ = 1;
  int me_ = 0;
};

Options parse(int argc, char** argv) {
  Options options;
  options.seed = std::strtoull(argv[1], nullptr, 10);
  options.ops = std::atoi(argv[2]);
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string name = argv[i], value = argv[i + 1];
    if (name == "--die-at-key") options.die_at_key = value;
    if (name == "--die-rank") options.die_rank = std::atoi(value.c_str());
    if (name == "--mismatch-at") options.mismatch_at = std::atoi(value.c_str());
    if (name == "--mismatch-rank") options.mismatch_rank = std::atoi(value.c_str());
    if (name == "--mismatch-kind") options.mismatch_kind = value;
    if (name == "--die-occurrence") options.die_occurrence = std::atoi(value.c_str());
    if (name == "--stop-file") options.stop_file = value;
    if (name == "--no-final-barrier") options.final_barrier = value != "1";
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: comm-fault-worker SEED OPS [options]" << std::endl;
    return 2;
  }
  Options options = parse(argc, argv);
  int rank = std::atoi(env_or("RANK", "0").c_str());
  try {
    auto timeout = std::chrono::seconds(60);
    auto tcp = std::make_shared<comm::TcpStore>(
        env_or("MASTER_ADDR", "127.0.0.1"), static_cast<std::uint16_t>(std::atoi(env_or("MASTER_PORT", "0").c_str())),
        comm::TcpStoreOptions{.is_server = rank == 0, .timeout = timeout});
    comm::InitOptions init;
    init.store = std::make_shared<comm::testing::DyingStore>(
        tcp, rank == options.die_rank ? options.die_at_key : "",
        [](const std::string& key) {
          std::cout << "dying at " << now_ms() << " before " << key << std::endl;
          ::raise(SIGKILL);
        },
        options.die_occurrence);
    init.rank = rank;
    init.world_size = std::atoi(env_or("WORLD_SIZE", "1").c_str());
    init.timeout = timeout;
    auto world = comm::init_process_group(init);
    std::vector<int> evens;
    for (int r = 0; r < world->size(); r += 2) evens.push_back(r);
    auto even_group = world->new_group(evens);
    std::cout << "ready" << std::endl;
    Worker worker(options, world, even_group);
    int done = 0;
    for (; done < options.ops; ++done) {
      if (!options.stop_file.empty() && done % 20 == 0) {
        std::int32_t stop = world->rank() == 0 && std::ifstream(options.stop_file).good() ? 1 : 0;
        world->broadcast(comm::Buffer(&stop, 1, comm::DType::Int32), 0);
        if (stop != 0) break;
      }
      worker.run_operation(done);
    }
    // Without it, a rank may leave while its last messages are still on their way: they must
    // arrive all the same (issue 15, finding 5).
    if (options.final_barrier) world->barrier();
    std::cout << "DONE " << done << " hwm_kb " << peak_resident_kb() << std::endl;
    return 0;
  } catch (const comm::Error& error) {
    std::cout << "ERROR " << comm::to_string(error.code()) << " peer " << error.peer() << " at " << now_ms() << ": "
              << error.what() << std::endl;
    return 10;
  } catch (const Wrong& wrong) {
    std::cout << "WRONG " << wrong.detail << std::endl;
    return 20;
  }
}
