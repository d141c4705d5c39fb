// Test data and independent references for reductions: random inputs whose sums and products
// stay exact, and the fold of one element over ranks computed in double (floating types) or in
// 64-bit integers wrapped to the type's width (integer types and bool).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algorithms/half.hpp"
#include "comm/types.hpp"

namespace comm::testing {

using comm::DType;
using comm::ReduceOp;
namespace algorithms = comm::algorithms;

constexpr DType kAllTypes[] = {DType::Int8,    DType::UInt8,   DType::Int32,   DType::UInt32,
                               DType::Int64,   DType::UInt64,  DType::Float16, DType::BFloat16,
                               DType::Float32, DType::Float64, DType::Bool};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max,
                                ReduceOp::Avg, ReduceOp::BAnd,    ReduceOp::BOr, ReduceOp::BXor};

inline bool is_float(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 || dtype == DType::Float64;
}

// Element i of a buffer, read as double (floats) or as a 64-bit pattern (integers, bool).
inline double read_float(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
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

inline std::int64_t read_integer(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::Int8: return static_cast<std::int8_t>(bytes[i]);
    case DType::UInt8:
    case DType::Bool: return bytes[i];
    case DType::Int32: {
      std::int32_t v;
      std::memcpy(&v, &bytes[4 * i], 4);
      return v;
    }
    case DType::UInt32: {
      std::uint32_t v;
      std::memcpy(&v, &bytes[4 * i], 4);
      return v;
    }
    default: {
      std::int64_t v;
      std::memcpy(&v, &bytes[8 * i], 8);
      return v;
    }
  }
}

// Random values small enough that products of a few stay exact in every type.
inline std::vector<std::uint8_t> random_buffer(DType dtype, std::size_t count, std::mt19937& random) {
  std::size_t size = comm::element_size(dtype);
  std::vector<std::uint8_t> bytes(count * size);
  std::uniform_int_distribution<int> small(-3, 3);
  for (std::size_t i = 0; i < count; ++i) {
    int value = small(random);
    switch (dtype) {
      case DType::Float16: {
        auto bits = algorithms::float_to_float16(static_cast<float>(value) * 0.5f);
        std::memcpy(&bytes[2 * i], &bits, 2);
        break;
      }
      case DType::BFloat16: {
        auto bits = algorithms::float_to_bfloat16(static_cast<float>(value) * 0.5f);
        std::memcpy(&bytes[2 * i], &bits, 2);
        break;
      }
      case DType::Float32: {
        float v = static_cast<float>(value) * 0.37f;
        std::memcpy(&bytes[4 * i], &v, 4);
        break;
      }
      case DType::Float64: {
        double v = value * 0.37;
        std::memcpy(&bytes[8 * i], &v, 8);
        break;
      }
      case DType::Bool: bytes[i] = value > 0 ? 1 : 0; break;
      case DType::UInt8:
      case DType::UInt32:
      case DType::UInt64: {
        std::uint64_t v = static_cast<std::uint64_t>(value + 3) * 37u;  // some bits to play with
        std::memcpy(&bytes[i * size], &v, size);
        break;
      }
      default: {
        std::int64_t v = value * 37;
        std::memcpy(&bytes[i * size], &v, size);
        break;
      }
    }
  }
  return bytes;
}

// The reference fold over `inputs` for one element, in double or 64-bit integers.
inline double reference_float(const std::vector<double>& values, ReduceOp op) {
  double result = values[0];
  for (std::size_t r = 1; r < values.size(); ++r) {
    double v = values[r];
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: result += v; break;
      case ReduceOp::Product: result *= v; break;
      case ReduceOp::Min: result = std::min(result, v); break;
      case ReduceOp::Max: result = std::max(result, v); break;
      default: break;
    }
  }
  return op == ReduceOp::Avg ? result / static_cast<double>(values.size()) : result;
}

inline std::int64_t reference_integer(const std::vector<std::int64_t>& values, ReduceOp op, DType dtype) {
  std::int64_t result = values[0];
  for (std::size_t r = 1; r < values.size(); ++r) {
    std::int64_t v = values[r];
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: result = dtype == DType::Bool ? (result | v) : result + v; break;
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
    result = is_signed && (wrapped >> (bits - 1)) ? static_cast<std::int64_t>(wrapped | ~mask)
                                                  : static_cast<std::int64_t>(wrapped);
  }
  if (op == ReduceOp::Avg && dtype != DType::Bool) result /= static_cast<std::int64_t>(values.size());
  return result;
}

// How many elements of `result` differ from the reference fold of `inputs` (exact for integers;
// for floats within one rounding per step of the type).
inline std::size_t count_wrong(const std::vector<std::uint8_t>& result,
                               const std::vector<std::vector<std::uint8_t>>& inputs, DType dtype, ReduceOp op,
                               std::size_t count) {
  std::size_t wrong = 0;
  std::vector<double> values;
  std::vector<std::int64_t> integers;
  for (std::size_t i = 0; i < count; ++i) {
    if (is_float(dtype)) {
      values.clear();
      for (auto& input : inputs) values.push_back(read_float(input, dtype, i));
      double expected = reference_float(values, op);
      // Exact inputs; one rounding per step for the half types, none beyond float's for float.
      double tolerance = dtype == DType::Float16    ? 1e-2
                         : dtype == DType::BFloat16 ? 6e-2
                         : dtype == DType::Float32  ? 1e-5
                                                    : 1e-12;
      if (std::abs(read_float(result, dtype, i) - expected) > tolerance * std::max(1.0, std::abs(expected))) ++wrong;
    } else {
      integers.clear();
      for (auto& input : inputs) integers.push_back(read_integer(input, dtype, i));
      if (read_integer(result, dtype, i) != reference_integer(integers, op, dtype)) ++wrong;
    }
  }
  return wrong;
}

// What is wrong in `result` for a failure message: "" when nothing; else how many elements, and
// the first wrong one with what it holds and what it should (integers and bools: exact values).
inline std::string describe_wrong(const std::vector<std::uint8_t>& result,
                                  const std::vector<std::vector<std::uint8_t>>& inputs, DType dtype, ReduceOp op,
                                  std::size_t count) {
  std::size_t wrong = count_wrong(result, inputs, dtype, op, count);
  if (wrong == 0) return {};
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<std::vector<std::uint8_t>> one_input;
    std::vector<std::uint8_t> one_result(
        result.begin() + static_cast<std::ptrdiff_t>(i * comm::element_size(dtype)),
        result.begin() + static_cast<std::ptrdiff_t>((i + 1) * comm::element_size(dtype)));
    for (auto& input : inputs) {
      one_input.emplace_back(input.begin() + static_cast<std::ptrdiff_t>(i * comm::element_size(dtype)),
                             input.begin() + static_cast<std::ptrdiff_t>((i + 1) * comm::element_size(dtype)));
    }
    if (count_wrong(one_result, one_input, dtype, op, 1) == 0) continue;
    std::string got =
        is_float(dtype) ? std::to_string(read_float(result, dtype, i)) : std::to_string(read_integer(result, dtype, i));
    std::string want;
    if (is_float(dtype)) {
      std::vector<double> values;
      for (auto& input : inputs) values.push_back(read_float(input, dtype, i));
      want = std::to_string(reference_float(values, op));
    } else {
      std::vector<std::int64_t> integers;
      for (auto& input : inputs) integers.push_back(read_integer(input, dtype, i));
      want = std::to_string(reference_integer(integers, op, dtype));
    }
    return std::to_string(wrong) + " of " + std::to_string(count) + " wrong, the first at " + std::to_string(i) + ": " +
           got + " instead of " + want;
  }
  return std::to_string(wrong) + " wrong";
}

// Rank r's input for a test case: the same bytes wherever it is computed, so every rank can
// build the reference from all ranks' inputs without receiving them.
inline std::vector<std::uint8_t> rank_input(int rank, DType dtype, std::size_t count, unsigned salt) {
  std::mt19937 random(salt * 7919u + static_cast<unsigned>(rank) * 104729u + static_cast<unsigned>(dtype));
  return random_buffer(dtype, count, random);
}

inline std::vector<std::vector<std::uint8_t>> all_inputs(int ranks, DType dtype, std::size_t count, unsigned salt) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(rank_input(r, dtype, count, salt));
  return inputs;
}

}  // namespace comm::testing
