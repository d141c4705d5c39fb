// sgd: distributed synchronous SGD, the tutorials' training example in C++. A linear model
// y = w.x + b learns from a synthetic data set (known weights plus noise) that is partitioned
// across ranks; after each batch the ranks sum their gradients and sample counts with
// all_reduce, so every rank takes the same step and the model stays identical everywhere.
// Each epoch every rank prints the global mean loss: the same line on every rank.
//   commrun -n 4 build/examples/sgd
#include <comm/comm.hpp>

#include <cmath>
#include <cstdio>
#include <random>

#include "show.hpp"

namespace {

constexpr int kFeatures = 8;
constexpr int kSamples = 1536;
constexpr int kBatchesPerEpoch = 16;
constexpr int kEpochs = 10;
constexpr double kLearningRate = 0.05;

struct Sample {
  std::vector<double> x;
  double y;
};

// The same data set on every rank (fixed seed); each rank then keeps its own slice.
std::vector<Sample> make_data_set() {
  std::mt19937 random(2026);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> true_weights(kFeatures);
  for (int j = 0; j < kFeatures; ++j) true_weights[j] = 0.5 * (j + 1) * (j % 2 ? -1 : 1);
  std::vector<Sample> samples(kSamples);
  for (auto& sample : samples) {
    sample.x.resize(kFeatures);
    sample.y = 1.5;  // the true bias
    for (int j = 0; j < kFeatures; ++j) {
      sample.x[j] = normal(random);
      sample.y += true_weights[j] * sample.x[j];
    }
    sample.y += 0.1 * normal(random);
  }
  return samples;
}

}  // namespace

int main() try {
  auto group = comm::init_process_group();
  int rank = group->rank(), size = group->size();
  auto data = make_data_set();
  // This rank's partition: samples [first, last).
  std::size_t first = kSamples * static_cast<std::size_t>(rank) / size;
  std::size_t last = kSamples * static_cast<std::size_t>(rank + 1) / size;
  std::size_t mine = last - first;

  std::vector<double> weights(kFeatures + 1, 0.0);  // the bias is the last
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double loss_sum = 0;
    for (int batch = 0; batch < kBatchesPerEpoch; ++batch) {
      // Gradient sums of the mean squared error over this rank's share of the batch, plus the
      // number of samples, reduced together in one call.
      std::vector<double> gradient(kFeatures + 2, 0.0);
      std::size_t begin = first + mine * batch / kBatchesPerEpoch, end = first + mine * (batch + 1) / kBatchesPerEpoch;
      for (std::size_t i = begin; i < end; ++i) {
        const Sample& sample = data[i];
        double prediction = weights[kFeatures];
        for (int j = 0; j < kFeatures; ++j) prediction += weights[j] * sample.x[j];
        double error = prediction - sample.y;
        loss_sum += error * error;
        for (int j = 0; j < kFeatures; ++j) gradient[j] += 2 * error * sample.x[j];
        gradient[kFeatures] += 2 * error;
        gradient[kFeatures + 1] += 1;
      }
      group->all_reduce(gradient, comm::ReduceOp::Sum);
      double samples = gradient[kFeatures + 1];
      for (int j = 0; j <= kFeatures; ++j) weights[j] -= kLearningRate * gradient[j] / samples;
    }
    std::vector<double> loss{loss_sum};
    group->all_reduce(loss, comm::ReduceOp::Sum);
    char line[128];
    std::snprintf(line, sizeof line, "rank %d, epoch %d: loss %.6f", rank, epoch, loss[0] / kSamples);
    say(line);
  }
  return 0;
} catch (const comm::Error& error) {
  std::cerr << error.what() << "\n";
  return 1;
}
