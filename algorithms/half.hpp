// float16 (IEEE binary16) and bfloat16 as 16-bit storage, converted to and from float with
// round-to-nearest-even. Reductions on them compute in float (design: half types accumulate in
// float32 registers) and round once per step.
#pragma once

#include <bit>
#include <cstdint>

namespace comm::algorithms {

inline float bfloat16_to_float(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

inline std::uint16_t float_to_bfloat16(float value) {
  auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  }
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float float16_to_float(std::uint16_t half) {
  std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  std::uint32_t exponent = (half >> 10) & 0x1Fu;
  std::uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mantissa * 2^-24.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_float16(float value) {
  auto bits = std::bit_cast<std::uint32_t>(value);
  auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7C00u |
                                      (magnitude > 0x7F800000u ? 0x200u | ((magnitude >> 13) & 0x3FFu) : 0u));
  }
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // Subnormal or zero in half precision: scale so the integer part is the half mantissa,
    // and let the float unit round to nearest even.
    float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    auto mantissa = static_cast<std::uint32_t>(scaled);
    float rest = scaled - static_cast<float>(mantissa);
    if (rest > 0.5f || (rest == 0.5f && (mantissa & 1u))) ++mantissa;
    return static_cast<std::uint16_t>(sign | mantissa);  // 0x400 here is the smallest normal
  }
  // Normal: re-bias the exponent, then round the 13 dropped mantissa bits to nearest even.
  std::uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace comm::algorithms
