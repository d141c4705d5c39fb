// The CPU reduction seam: every dtype x op against a reference computed independently (in
// double for floating types, in 64-bit integers for integer types), plus the half conversions.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "comm/error.hpp"
#include "half.hpp"
#include "reduce.hpp"

using Catch::Matchers::ContainsSubstring;
using comm::DType;
using comm::ReduceOp;
namespace algorithms = comm::algorithms;

namespace {

constexpr DType kAllTypes[] = {DType::Int8,    DType::UInt8,    DType::Int32,   DType::UInt32,  DType::Int64, DType::UInt64,
                               DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Bool};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,  ReduceOp::Max,
                                ReduceOp::Avg, ReduceOp::BAnd,    ReduceOp::BOr, ReduceOp::BXor};

bool is_float(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 || dtype == DType::Float64;
}

// Element i of a buffer, read as double (floats) or as a 64-bit pattern (integers, bool).
double read_float(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::Float16: {
      std::uint16_t bits;
      std::memcpy(&bits, &bytes[2 * i], 2);
      return algorithms::float16_to_float(bits);
    }
    case DType::BFloat16: {
      std::uint16_t bits;
      std::memcpy(&bits, &bytes[2 * i], 2);
      return algorithms::bfloat16_to_float(bits);
    }
    case DType::Float32: {
      float value;
      std::memcpy(&value, &bytes[4 * i], 4);
      return value;
    }
    default: {
      double value;
      std::memcpy(&value, &bytes[8 * i], 8);
      return value;
    }
  }
}

std::int64_t read_integer(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::Int8: return static_cast<std::int8_t>(bytes[i]);
    case DType::UInt8: case DType::Bool: return bytes[i];
    case DType::Int32: { std::int32_t v; std::memcpy(&v, &bytes[4 * i], 4); return v; }
    case DType::UInt32: { std::uint32_t v; std::memcpy(&v, &bytes[4 * i], 4); return v; }
    default: { std::int64_t v; std::memcpy(&v, &bytes[8 * i], 8); return v; }
  }
}

// Random values small enough that products of a few stay exact in every type.
std::vector<std::uint8_t> random_buffer(DType dtype, std::size_t count, std::mt19937& random) {
  std::size_t size = comm::element_size(dtype);
  std::vector<std::uint8_t> bytes(count * size);
  std::uniform_int_distribution<int> small(-3, 3);
  for (std::size_t i = 0; i < count; ++i) {
    int value = small(random);
    switch (dtype) {
      case DType::Float16: { auto bits = algorithms::float_to_float16(static_cast<float>(value) * 0.5f); std::memcpy(&bytes[2 * i], &bits, 2); break; }
      case DType::BFloat16: { auto bits = algorithms::float_to_bfloat16(static_cast<float>(value) * 0.5f); std::memcpy(&bytes[2 * i], &bits, 2); break; }
      case DType::Float32: { float v = static_cast<float>(value) * 0.37f; std::memcpy(&bytes[4 * i], &v, 4); break; }
      case DType::Float64: { double v = value * 0.37; std::memcpy(&bytes[8 * i], &v, 8); break; }
      case DType::Bool: bytes[i] = value > 0 ? 1 : 0; break;
      case DType::UInt8: case DType::UInt32: case DType::UInt64: {
        std::uint64_t v = static_cast<std::uint64_t>(value + 3) * 37u;  // some bits to play with
        std::memcpy(&bytes[i * size], &v, size);
        break;
      }
      default: { std::int64_t v = value * 37; std::memcpy(&bytes[i * size], &v, size); break; }
    }
  }
  return bytes;
}

// The reference fold over `inputs` for one element, in double or 64-bit integers.
double reference_float(const std::vector<double>& values, ReduceOp op) {
  double result = values[0];
  for (std::size_t r = 1; r < values.size(); ++r) {
    double v = values[r];
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: result += v; break;
      case ReduceOp::Product: result *= v; break;
      case ReduceOp::Min: result = std::min(result, v); break;
      case ReduceOp::Max: result = std::max(result, v); break;
      default: break;
    }
  }
  return op == ReduceOp::Avg ? result / static_cast<double>(values.size()) : result;
}

std::int64_t reference_integer(const std::vector<std::int64_t>& values, ReduceOp op, DType dtype) {
  std::int64_t result = values[0];
  for (std::size_t r = 1; r < values.size(); ++r) {
    std::int64_t v = values[r];
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: result = dtype == DType::Bool ? (result | v) : result + v; break;
      case ReduceOp::Product: result = dtype == DType::Bool ? (result & v) : result * v; break;
      case ReduceOp::Min: result = std::min(result, v); break;
      case ReduceOp::Max: result = std::max(result, v); break;
      case ReduceOp::BAnd: result &= v; break;
      case ReduceOp::BOr: result |= v; break;
      case ReduceOp::BXor: result ^= v; break;
    }
  }
  // Wrap to the type's width, then average (the library divides the wrapped sum).
  std::size_t bits = 8 * comm::element_size(dtype);
  if (bits < 64) {
    std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
    std::uint64_t wrapped = static_cast<std::uint64_t>(result) & mask;
    bool is_signed = dtype == DType::Int8 || dtype == DType::Int32;
    result = is_signed && (wrapped >> (bits - 1)) ? static_cast<std::int64_t>(wrapped | ~mask) : static_cast<std::int64_t>(wrapped);
  }
  if (op == ReduceOp::Avg && dtype != DType::Bool) result /= static_cast<std::int64_t>(values.size());
  return result;
}

}  // namespace

TEST_CASE("every dtype x op matches an independent reference", "[reduce]") {
  auto [ranks, count] = GENERATE(table<int, std::size_t>({{2, 1}, {2, 7}, {3, 7}, {5, 1}, {5, 7}, {2, 1000003}, {3, 4099}}));
  std::mt19937 random(static_cast<unsigned>(ranks * 1000 + count));
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!algorithms::supports(dtype, op)) continue;
      INFO(comm::to_string(dtype) << " " << comm::to_string(op) << ", " << ranks << " ranks, count " << count);
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < ranks; ++r) inputs.push_back(random_buffer(dtype, count, random));
      std::vector<std::uint8_t> result = inputs[0];
      for (int r = 1; r < ranks; ++r) algorithms::reduce(result.data(), inputs[r].data(), count, dtype, op);
      if (op == ReduceOp::Avg) algorithms::divide(result.data(), count, dtype, static_cast<std::size_t>(ranks));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) {
        if (is_float(dtype)) {
          std::vector<double> values;
          for (auto& input : inputs) values.push_back(read_float(input, dtype, i));
          double expected = reference_float(values, op);
          // Exact inputs; one rounding per step for the half types, none beyond float's for float.
          double tolerance = dtype == DType::Float16 ? 1e-2 : dtype == DType::BFloat16 ? 6e-2 : dtype == DType::Float32 ? 1e-5 : 1e-12;
          if (std::abs(read_float(result, dtype, i) - expected) > tolerance * std::max(1.0, std::abs(expected))) ++wrong;
        } else {
          std::vector<std::int64_t> values;
          for (auto& input : inputs) values.push_back(read_integer(input, dtype, i));
          if (read_integer(result, dtype, i) != reference_integer(values, op, dtype)) ++wrong;
        }
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("in-place reduction combines a buffer with itself", "[reduce]") {
  std::vector<float> data{1.5f, -2.0f, 3.25f};
  algorithms::reduce(data.data(), data.data(), data.size(), DType::Float32, ReduceOp::Sum);
  CHECK(data == std::vector<float>{3.0f, -4.0f, 6.5f});
  std::vector<std::int32_t> integers{5, -7};
  algorithms::reduce(integers.data(), integers.data(), integers.size(), DType::Int32, ReduceOp::BXor);
  CHECK(integers == std::vector<std::int32_t>{0, 0});
}

TEST_CASE("bitwise ops on floating point are rejected, naming the pair", "[reduce][bad-input]") {
  float a = 1, b = 2;
  for (DType dtype : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    for (ReduceOp op : {ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor}) {
      CHECK_FALSE(algorithms::supports(dtype, op));
      CHECK_THROWS_WITH(algorithms::reduce(&a, &b, 1, dtype, op),
                        ContainsSubstring(comm::to_string(op)) && ContainsSubstring(comm::to_string(dtype)));
    }
  }
  CHECK_THROWS_AS(algorithms::reduce(&a, &b, 1, DType::Float32, ReduceOp::Sum, {comm::Device::Kind::Cuda, 0}),
                  comm::InvalidArgumentError);
  CHECK_THROWS_AS(algorithms::divide(&a, 1, DType::Float32, 0), comm::InvalidArgumentError);
}

TEST_CASE("half conversions round-trip every value and round to nearest even", "[reduce]") {
  std::size_t float16_wrong = 0, bfloat16_wrong = 0;
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    auto half = static_cast<std::uint16_t>(bits);
    float value = algorithms::float16_to_float(half);
    if (!std::isnan(value) && algorithms::float_to_float16(value) != half) ++float16_wrong;
    float brain = algorithms::bfloat16_to_float(half);
    if (!std::isnan(brain) && algorithms::float_to_bfloat16(brain) != half) ++bfloat16_wrong;
    if (std::isnan(value)) CHECK(std::isnan(algorithms::float16_to_float(algorithms::float_to_float16(value))));
  }
  CHECK(float16_wrong == 0);
  CHECK(bfloat16_wrong == 0);
  // Ties go to even; overflow goes to infinity; the smallest subnormal survives.
  CHECK(algorithms::float_to_float16(1.0f + 0x1p-11f) == 0x3C00);            // halfway, even stays
  CHECK(algorithms::float_to_float16(1.0f + 3 * 0x1p-11f) == 0x3C02);        // halfway, odd rounds up
  CHECK(algorithms::float_to_float16(70000.0f) == 0x7C00);
  CHECK(algorithms::float_to_float16(0x1p-24f) == 0x0001);
  CHECK(algorithms::float16_to_float(0x0001) == 0x1p-24f);
  CHECK(algorithms::float_to_bfloat16(1.0f + 0x1p-8f) == 0x3F80);
  CHECK(algorithms::float_to_bfloat16(1.0f + 3 * 0x1p-8f) == 0x3F82);
}
