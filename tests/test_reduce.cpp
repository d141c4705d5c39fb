// The CPU reduction seam: every dtype x op against a reference computed independently (in
// double for floating types, in 64-bit integers for integer types), plus the half conversions.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "algorithms/cpu_reduce.hpp"
#include "algorithms/half.hpp"
#include "algorithms/reduce.hpp"
#include "comm/error.hpp"
#include "tests/support/reduce_reference.hpp"

using Catch::Matchers::ContainsSubstring;
using comm::DType;
using comm::ReduceOp;
namespace algorithms = comm::algorithms;

using namespace comm::testing;

TEST_CASE("every dtype x op matches an independent reference", "[reduce]") {
  auto [ranks, count] =
      GENERATE(table<int, std::size_t>({{2, 1}, {2, 7}, {3, 7}, {5, 1}, {5, 7}, {2, 1000003}, {3, 4099}}));
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
      std::size_t wrong = count_wrong(result, inputs, dtype, op, count);
      CHECK(wrong == 0);
    }
  }
}

namespace {

// Two random operands; for float32 their first elements pair -0 with +0 and NaN with a number
// both ways round, where Min and Max depend on the operands' order.
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> operands_with_signed_zeros_and_nans(
    DType dtype, std::size_t count, std::mt19937& random) {
  auto a = random_buffer(dtype, count, random), b = random_buffer(dtype, count, random);
  if (dtype == DType::Float32) {
    float special[] = {-0.0f, 0.0f, std::nanf(""), 1.0f};
    float other[] = {0.0f, -0.0f, 1.0f, std::nanf("")};
    std::memcpy(a.data(), special, sizeof special);
    std::memcpy(b.data(), other, sizeof other);
  }
  return {std::move(a), std::move(b)};
}

}  // namespace

TEST_CASE("combine gives reduce's bits whichever operand the output is", "[reduce]") {
  // out = a op b: into a third buffer, into a, into b. The operands keep their order, so Min
  // and Max of -0.0 and +0.0, or of a NaN, come out as a reduce into a would.
  const std::size_t count = 1031;
  std::mt19937 random(7);
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!algorithms::supports(dtype, op)) continue;
      INFO(comm::to_string(dtype) << " " << comm::to_string(op));
      auto [a, b] = operands_with_signed_zeros_and_nans(dtype, count, random);
      std::vector<std::uint8_t> expected = a;
      algorithms::reduce(expected.data(), b.data(), count, dtype, op);
      // (Avg is a Sum until divide(); the reference of the first test case covers it.)
      if (op != ReduceOp::Avg)
        CHECK(count_wrong(expected, {a, b}, dtype, op, count) <= (dtype == DType::Float32 ? 4u : 0u));

      std::vector<std::uint8_t> apart(a.size()), into_a = a, into_b = b;
      algorithms::combine(apart.data(), a.data(), b.data(), count, dtype, op);
      algorithms::combine(into_a.data(), into_a.data(), b.data(), count, dtype, op);
      algorithms::combine(into_b.data(), a.data(), into_b.data(), count, dtype, op);
      CHECK(apart == expected);
      CHECK(into_a == expected);
      CHECK(into_b == expected);
    }
  }
}

TEST_CASE("the AVX2 loops give the baseline loops' bits for every dtype x op", "[reduce]") {
#if defined(COMM_HAVE_AVX2_REDUCE)
  if (!__builtin_cpu_supports("avx2")) SKIP("this CPU has no AVX2");
  const std::size_t count = 4099;  // a vector tail too
  std::mt19937 random(11);
  for (DType dtype : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!algorithms::supports(dtype, op)) continue;
      INFO(comm::to_string(dtype) << " " << comm::to_string(op));
      auto [a, b] = operands_with_signed_zeros_and_nans(dtype, count, random);
      std::vector<std::uint8_t> baseline(a.size()), wide(a.size());
      algorithms::baseline::cpu_reduce(baseline.data(), a.data(), b.data(), count, dtype, op);
      algorithms::avx2::cpu_reduce(wide.data(), a.data(), b.data(), count, dtype, op);
      CHECK(baseline == wide);
      // Into the first and into the second operand (their own loops).
      std::vector<std::uint8_t> baseline_into_a = a, wide_into_a = a, baseline_into_b = b, wide_into_b = b;
      algorithms::baseline::cpu_reduce(baseline_into_a.data(), baseline_into_a.data(), b.data(), count, dtype, op);
      algorithms::avx2::cpu_reduce(wide_into_a.data(), wide_into_a.data(), b.data(), count, dtype, op);
      algorithms::baseline::cpu_reduce(baseline_into_b.data(), a.data(), baseline_into_b.data(), count, dtype, op);
      algorithms::avx2::cpu_reduce(wide_into_b.data(), a.data(), wide_into_b.data(), count, dtype, op);
      CHECK(baseline_into_a == wide_into_a);
      CHECK(baseline_into_b == wide_into_b);
      CHECK(wide_into_a == wide);
      algorithms::baseline::cpu_divide(baseline.data(), count, dtype, 3);
      algorithms::avx2::cpu_divide(wide.data(), count, dtype, 3);
      CHECK(baseline == wide);
    }
  }
#else
  SKIP("built without the AVX2 loops (not x86-64)");
#endif
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
  CHECK(algorithms::float_to_float16(1.0f + 0x1p-11f) == 0x3C00);      // halfway, even stays
  CHECK(algorithms::float_to_float16(1.0f + 3 * 0x1p-11f) == 0x3C02);  // halfway, odd rounds up
  CHECK(algorithms::float_to_float16(70000.0f) == 0x7C00);
  CHECK(algorithms::float_to_float16(0x1p-24f) == 0x0001);
  CHECK(algorithms::float16_to_float(0x0001) == 0x1p-24f);
  CHECK(algorithms::float_to_bfloat16(1.0f + 0x1p-8f) == 0x3F80);
  CHECK(algorithms::float_to_bfloat16(1.0f + 3 * 0x1p-8f) == 0x3F82);
}
