// all_reduce (ring) over both transports: results against a reference computed in the test,
// and bitwise-identical bytes on every rank.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "half.hpp"
#include "support/thread_ranks.hpp"

using comm::DType;
using comm::ReduceOp;
using comm::testing::RankChecks;
using comm::testing::run_ranks;

namespace {

// Rank r's element i: a small integer, exactly representable in every dtype.
std::int64_t input(int rank, std::size_t i, DType dtype) {
  if (dtype == DType::Bool) return ((rank + i) % 3) == 0;
  return static_cast<std::int64_t>((rank * 7 + i * 3) % 11) - 5 + (dtype == DType::UInt8 ? 5 : 0);
}

void store(std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i, double value) {
  switch (dtype) {
    case DType::Int32: { auto v = static_cast<std::int32_t>(value); std::memcpy(&bytes[4 * i], &v, 4); break; }
    case DType::UInt8: case DType::Bool: bytes[i] = static_cast<std::uint8_t>(value); break;
    case DType::Float32: { auto v = static_cast<float>(value); std::memcpy(&bytes[4 * i], &v, 4); break; }
    case DType::Float64: std::memcpy(&bytes[8 * i], &value, 8); break;
    case DType::Float16: { auto v = comm::algorithms::float_to_float16(static_cast<float>(value)); std::memcpy(&bytes[2 * i], &v, 2); break; }
    default: break;
  }
}

double load(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::Int32: { std::int32_t v; std::memcpy(&v, &bytes[4 * i], 4); return v; }
    case DType::UInt8: case DType::Bool: return bytes[i];
    case DType::Float32: { float v; std::memcpy(&v, &bytes[4 * i], 4); return v; }
    case DType::Float64: { double v; std::memcpy(&v, &bytes[8 * i], 8); return v; }
    case DType::Float16: { std::uint16_t v; std::memcpy(&v, &bytes[2 * i], 2); return comm::algorithms::float16_to_float(v); }
    default: return 0;
  }
}

double expected(int ranks, std::size_t i, DType dtype, ReduceOp op) {
  bool is_float = dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Float16;
  double result = static_cast<double>(input(0, i, dtype));
  auto bits = static_cast<std::int64_t>(result);
  for (int r = 1; r < ranks; ++r) {
    double v = static_cast<double>(input(r, i, dtype));
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: result = dtype == DType::Bool ? std::max(result, v) : result + v; break;
      case ReduceOp::Max: result = std::max(result, v); break;
      case ReduceOp::Min: result = std::min(result, v); break;
      case ReduceOp::BXor: bits ^= input(r, i, dtype); result = static_cast<double>(bits); break;
      default: break;
    }
  }
  if (op == ReduceOp::Avg && dtype != DType::Bool) {
    result = is_float ? result / ranks : std::trunc(result / ranks);
  }
  if (dtype == DType::UInt8) result = static_cast<double>(static_cast<std::uint8_t>(static_cast<std::int64_t>(result)));
  return result;
}

}  // namespace

TEST_CASE("ring all_reduce matches the reference on every rank, bitwise identical", "[collectives][all_reduce]") {
  std::string transport = GENERATE("tcp", "shm");
  int ranks = GENERATE(1, 2, 3, 4, 5, 7, 8);
  INFO(ranks << " ranks over " << transport);
  struct Case {
    DType dtype;
    ReduceOp op;
  };
  const std::vector<Case> cases{{DType::Float32, ReduceOp::Sum}, {DType::Float64, ReduceOp::Avg}, {DType::Int32, ReduceOp::Sum},
                                {DType::Int32, ReduceOp::Avg},   {DType::Int32, ReduceOp::BXor}, {DType::UInt8, ReduceOp::Max},
                                {DType::Float16, ReduceOp::Sum}, {DType::Bool, ReduceOp::Sum},   {DType::Float32, ReduceOp::Min}};
  const std::vector<std::size_t> counts{0, 1, 7, 1000, 100003};
  RankChecks checks;
  std::mutex mutex;
  std::map<std::tuple<int, std::size_t, int>, std::vector<std::uint8_t>> results;  // (case, count, rank)
  run_ranks(ranks, [&](comm::ProcessGroup& group) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      auto [dtype, op] = cases[c];
      for (std::size_t count : counts) {
        std::vector<std::uint8_t> bytes(count * comm::element_size(dtype) + 1);
        for (std::size_t i = 0; i < count; ++i) store(bytes, dtype, i, static_cast<double>(input(group.rank(), i, dtype)));
        group.all_reduce(comm::Buffer(bytes.data(), count, dtype), op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i) {
          double want = expected(ranks, i, dtype, op), got = load(bytes, dtype, i);
          if (std::abs(got - want) > 1e-6 * std::max(1.0, std::abs(want))) ++wrong;
        }
        checks.check(wrong == 0, "values match the reference", __LINE__,
                     std::string(comm::to_string(dtype)) + " " + comm::to_string(op) + " count " + std::to_string(count) +
                         ": " + std::to_string(wrong) + " wrong on rank " + std::to_string(group.rank()));
        std::lock_guard lock(mutex);
        results[{static_cast<int>(c), count, group.rank()}] = std::move(bytes);
      }
    }
  }, std::chrono::seconds(60), transport);
  REQUIRE_RANK_CHECKS(checks);
  std::size_t differing = 0;
  for (const auto& [key, bytes] : results) {
    auto [c, count, rank] = key;
    if (bytes != results[{c, count, 0}]) ++differing;
  }
  CHECK(differing == 0);
}

TEST_CASE("all_reduce rejects bad input on the calling rank", "[collectives][all_reduce][bad-input]") {
  RankChecks checks;
  run_ranks(2, [&](comm::ProcessGroup& group) {
    std::vector<float> data(4, 1.0f);
    RANK_CHECK_THROWS(checks, group.all_reduce(data, ReduceOp::BAnd), "band", "float32");
    RANK_CHECK_THROWS(checks, group.all_reduce(comm::Buffer(nullptr, 3, DType::Float32)), "null pointer");
    group.all_reduce(data);  // the group still works afterwards
    RANK_CHECK(checks, data[0] == 2.0f);
  });
  REQUIRE_RANK_CHECKS(checks);
}
