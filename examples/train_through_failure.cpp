// train_through_failure: data-parallel SGD that survives a rank killed with SIGKILL. A linear
// model learns from a synthetic data set split across the ranks; each step the ranks sum their
// gradients with all_reduce. When a rank dies, the step fails on the survivors: they shrink the
// group, agree on the step to redo (one of them may have finished it), re-split the data among
// themselves and go on. Under `commrun --restart N` a replacement process joins: the survivors
// grow the group back, and it receives the model and the step by broadcast.
//   commrun --on-failure continue -n 4 build/examples/train_through_failure   (kill -9 one rank)
//   commrun --restart 1 -n 4 build/examples/train_through_failure
// Every rank ends with a line "final: step S, R ranks, loss L, model H" (H: a hash of the
// weights' bytes, the same on every rank).
#include <unistd.h>

#include <chrono>
#include <comm/comm.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kFeatures = 8;
constexpr int kSamples = 2048;
constexpr int kBatch = 64;  // per step, split among the ranks
constexpr int kSteps = 150;
constexpr double kLearningRate = 0.05;

struct DataSet {
  std::vector<double> x, y;  // kSamples rows of kFeatures, and the targets
};

DataSet make_data_set() {
  std::mt19937 random(2026);
  std::normal_distribution<double> normal(0.0, 1.0);
  DataSet data{std::vector<double>(kSamples * kFeatures), std::vector<double>(kSamples)};
  for (int i = 0; i < kSamples; ++i) {
    double y = 1.5;
    for (int j = 0; j < kFeatures; ++j) {
      double x = normal(random);
      data.x[static_cast<std::size_t>(i * kFeatures + j)] = x;
      y += 0.5 * (j + 1) * (j % 2 ? -1 : 1) * x;
    }
    data.y[static_cast<std::size_t>(i)] = y + 0.1 * normal(random);
  }
  return data;
}

// The gradient (and loss) of this rank's share of step `step`'s batch, plus its sample count,
// summed into `sums` (kFeatures + 1 weights, then the loss, then the count).
void local_gradient(const DataSet& data, const std::vector<double>& weights, int step, int rank, int size,
                    std::vector<double>& sums) {
  std::fill(sums.begin(), sums.end(), 0.0);
  for (int k = rank; k < kBatch; k += size) {  // the batch's samples, dealt round the ranks
    int i = (step * kBatch + k) % kSamples;
    double error = weights[kFeatures];
    for (int j = 0; j < kFeatures; ++j) error += weights[j] * data.x[static_cast<std::size_t>(i * kFeatures + j)];
    error -= data.y[static_cast<std::size_t>(i)];
    for (int j = 0; j < kFeatures; ++j) sums[j] += error * data.x[static_cast<std::size_t>(i * kFeatures + j)];
    sums[kFeatures] += error;
    sums[kFeatures + 1] += error * error;
    sums[kFeatures + 2] += 1;
  }
}

std::uint64_t hash_of(const std::vector<double>& values) {
  std::uint64_t hash = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(double); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

int environment_number(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : 0;
}

}  // namespace

int main() try {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines as they happen, also into a pipe
  // A replacement (commrun --restart sets COMM_JOIN) joins the running job here: init returns
  // once the survivors have called grow().
  auto group = comm::init_process_group();
  bool replacement = std::getenv("COMM_JOIN") != nullptr;
  int restarts_left = environment_number("COMM_RESTARTS") - environment_number("COMM_REPLACEMENT");
  DataSet data = make_data_set();
  std::vector<double> weights(kFeatures + 1, 0.0), before_step = weights, sums(kFeatures + 3);
  std::int64_t step = 0;
  if (replacement) {  // the model and the step, from the survivors
    group->broadcast(comm::Buffer(weights.data(), weights.size(), comm::DType::Float64), 0);
    group->broadcast(comm::Buffer(&step, 1, comm::DType::Int64), 0);
    std::printf("rank %d (pid %d) joined at step %lld\n", group->rank(), static_cast<int>(::getpid()),
                static_cast<long long>(step));
  }
  if (!replacement) std::printf("rank %d (pid %d) training\n", group->rank(), static_cast<int>(::getpid()));
  double loss = 0;
  while (step < kSteps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the forward and backward passes
    local_gradient(data, weights, static_cast<int>(step), group->rank(), group->size(), sums);
    try {
      group->all_reduce(comm::Buffer(sums.data(), sums.size(), comm::DType::Float64));
    } catch (const comm::Error& error) {
      std::printf("rank %d: step %lld failed: %s\n", group->rank(), static_cast<long long>(step), error.what());
      int before = group->size();
      group = group->shrink();  // every survivor calls it; they agree on who is left
      // A survivor may have finished the step the others failed: all redo the earliest.
      std::int64_t agreed = step;
      group->all_reduce(comm::Buffer(&agreed, 1, comm::DType::Int64), comm::ReduceOp::Min);
      if (agreed < step) weights = before_step;
      step = agreed;
      int lost = before - group->size();
      if (restarts_left > 0 && lost > 0) {  // commrun starts replacements: let them in
        int coming = std::min(lost, restarts_left);
        restarts_left -= coming;
        group = group->grow(coming);
        group->broadcast(comm::Buffer(weights.data(), weights.size(), comm::DType::Float64), 0);
        group->broadcast(comm::Buffer(&step, 1, comm::DType::Int64), 0);
      }
      std::printf("rank %d: going on from step %lld with %d ranks\n", group->rank(), static_cast<long long>(step),
                  group->size());
      continue;
    }
    before_step = weights;
    double count = sums[kFeatures + 2];
    for (int j = 0; j <= kFeatures; ++j) weights[j] -= kLearningRate * sums[j] / count;
    loss = sums[kFeatures + 1] / count;
    if (step % 50 == 0)
      std::printf("rank %d: step %lld loss %.6f\n", group->rank(), static_cast<long long>(step), loss);
    ++step;
  }
  std::printf("final: step %lld, %d ranks, loss %.6f, model %016llx\n", static_cast<long long>(step), group->size(),
              loss, static_cast<unsigned long long>(hash_of(weights)));
  return 0;
} catch (const comm::Error& error) {
  std::fprintf(stderr, "train_through_failure: %s\n", error.what());
  return 1;
}
