#include "c_check.h"

#include "comm/comm.h" /* the datatypes' names */

#include <math.h>
#include <string.h>
#include <time.h>

int check_failures = 0;
int check_count = 0;
int check_rank = -1;

double seconds_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

int check_summary(const char* name) {
  printf("[rank %d] %s: %d checks, %d failed\n", check_rank, name, check_count, check_failures);
  fflush(stdout);
  return check_failures == 0 ? 0 : 1;
}

const int all_datatypes[] = {COMM_INT8,    COMM_UINT8,   COMM_INT32,   COMM_UINT32,   COMM_INT64, COMM_UINT64,
                             COMM_FLOAT16, COMM_FLOAT32, COMM_FLOAT64, COMM_BFLOAT16, COMM_BOOL};
const size_t all_datatype_count = sizeof all_datatypes / sizeof all_datatypes[0];

const char* datatype_name(int datatype) {
  switch (datatype) {
    case COMM_INT8: return "int8";
    case COMM_UINT8: return "uint8";
    case COMM_INT32: return "int32";
    case COMM_UINT32: return "uint32";
    case COMM_INT64: return "int64";
    case COMM_UINT64: return "uint64";
    case COMM_FLOAT16: return "float16";
    case COMM_FLOAT32: return "float32";
    case COMM_FLOAT64: return "float64";
    case COMM_BFLOAT16: return "bfloat16";
    case COMM_BOOL: return "bool";
  }
  return "?";
}

size_t datatype_size(int datatype) {
  switch (datatype) {
    case COMM_INT8:
    case COMM_UINT8:
    case COMM_BOOL: return 1;
    case COMM_FLOAT16:
    case COMM_BFLOAT16: return 2;
    case COMM_INT32:
    case COMM_UINT32:
    case COMM_FLOAT32: return 4;
    case COMM_INT64:
    case COMM_UINT64:
    case COMM_FLOAT64: return 8;
  }
  return 0;
}

int datatype_is_float(int datatype) {
  return datatype == COMM_FLOAT16 || datatype == COMM_FLOAT32 || datatype == COMM_FLOAT64 || datatype == COMM_BFLOAT16;
}

int datatype_is_signed(int datatype) {
  return datatype == COMM_INT8 || datatype == COMM_INT32 || datatype == COMM_INT64 || datatype_is_float(datatype);
}

/* float <-> float16 / bfloat16 by their bits (binary16: 1-5-10, bfloat16: float's top half). */
static uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

static float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static double half_to_double(uint16_t half) {
  int sign = half >> 15, exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
  double magnitude;
  if (exponent == 0) {
    magnitude = ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

static uint16_t double_to_half(double value) {
  /* Through float (the tests' values are floats' too), rounding to nearest even. */
  uint32_t bits = float_bits((float)value);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7FFFFFFF;
  uint32_t half, rest;
  if (magnitude >= 0x7F800000) return (uint16_t)(sign | (magnitude > 0x7F800000 ? 0x7E00 : 0x7C00));
  if (magnitude >= 0x477FF000) return (uint16_t)(sign | 0x7C00); /* 65520 and up: infinity */
  if (magnitude < 0x38800000) {                                  /* below 2^-14: a subnormal half, in units of 2^-24 */
    return (uint16_t)(sign | (uint16_t)nearbyint(bits_float(magnitude) * 16777216.0));
  }
  half = (((magnitude >> 23) - 112) << 10) | ((magnitude & 0x7FFFFF) >> 13);
  rest = magnitude & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return (uint16_t)(sign | half);
}

static double bfloat_to_double(uint16_t bfloat) { return bits_float((uint32_t)bfloat << 16); }

static uint16_t double_to_bfloat(double value) {
  uint32_t bits = float_bits((float)value);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1); /* to nearest even */
  return (uint16_t)((bits + rounding) >> 16);
}

double load_value(int datatype, const void* buffer, size_t i) {
  switch (datatype) {
    case COMM_INT8: return ((const int8_t*)buffer)[i];
    case COMM_UINT8: return ((const uint8_t*)buffer)[i];
    case COMM_INT32: return ((const int32_t*)buffer)[i];
    case COMM_UINT32: return ((const uint32_t*)buffer)[i];
    case COMM_INT64: return (double)((const int64_t*)buffer)[i];
    case COMM_UINT64: return (double)((const uint64_t*)buffer)[i];
    case COMM_FLOAT16: return half_to_double(((const uint16_t*)buffer)[i]);
    case COMM_FLOAT32: return ((const float*)buffer)[i];
    case COMM_FLOAT64: return ((const double*)buffer)[i];
    case COMM_BFLOAT16: return bfloat_to_double(((const uint16_t*)buffer)[i]);
    case COMM_BOOL: return ((const uint8_t*)buffer)[i] != 0;
  }
  return NAN;
}

void store_value(int datatype, void* buffer, size_t i, double value) {
  switch (datatype) {
    case COMM_INT8: ((int8_t*)buffer)[i] = (int8_t)value; break;
    case COMM_UINT8: ((uint8_t*)buffer)[i] = (uint8_t)value; break;
    case COMM_INT32: ((int32_t*)buffer)[i] = (int32_t)value; break;
    case COMM_UINT32: ((uint32_t*)buffer)[i] = (uint32_t)value; break;
    case COMM_INT64: ((int64_t*)buffer)[i] = (int64_t)value; break;
    case COMM_UINT64: ((uint64_t*)buffer)[i] = (uint64_t)value; break;
    case COMM_FLOAT16: ((uint16_t*)buffer)[i] = double_to_half(value); break;
    case COMM_FLOAT32: ((float*)buffer)[i] = (float)value; break;
    case COMM_FLOAT64: ((double*)buffer)[i] = value; break;
    case COMM_BFLOAT16: ((uint16_t*)buffer)[i] = double_to_bfloat(value); break;
    case COMM_BOOL: ((uint8_t*)buffer)[i] = value != 0; break;
  }
}

double round_to(int datatype, double value) {
  unsigned char scratch[8];
  store_value(datatype, scratch, 0, value);
  return load_value(datatype, scratch, 0);
}

int op_is_bitwise(int op) { return op == COMM_BAND || op == COMM_BOR || op == COMM_BXOR; }

/* Rank r's element i: small values whose sums and products every datatype holds exactly. */
double reduction_input(int datatype, int op, int r, size_t i) {
  size_t mix = i * 7 + (size_t)r * 3;
  if (datatype == COMM_BOOL) return (i + (size_t)r) % 3 == 0;
  if (op == COMM_PRODUCT) {
    if (datatype_is_signed(datatype)) return mix % 3 == 0 ? -1 : (mix % 3 == 1 ? 2 : 1);
    return mix % 2 ? 2 : 1;
  }
  if (op_is_bitwise(op)) return (double)((i * 7 + (size_t)r * 13) % 64);
  return datatype_is_signed(datatype) ? (double)((int)(mix % 9) - 4) : (double)(mix % 9);
}

/* The reduction of every rank's element i, by libcomm's rules (docs/design/reduce.md). */
double reduction_result(int datatype, int op, int size, size_t i) {
  double result = reduction_input(datatype, op, 0, i);
  long long bits = (long long)result;
  int r;
  for (r = 1; r < size; ++r) {
    double value = reduction_input(datatype, op, r, i);
    switch (op) {
      case COMM_SUM:
      case COMM_AVG: result = datatype == COMM_BOOL ? (result || value) : result + value; break;
      case COMM_PRODUCT: result = datatype == COMM_BOOL ? (result && value) : result * value; break;
      case COMM_MAX: result = value > result ? value : result; break;
      case COMM_MIN: result = value < result ? value : result; break;
      case COMM_BAND: bits &= (long long)value; break;
      case COMM_BOR: bits |= (long long)value; break;
      case COMM_BXOR: bits ^= (long long)value; break;
    }
  }
  if (op_is_bitwise(op)) return (double)bits;
  if (op == COMM_AVG && datatype != COMM_BOOL) {
    if (datatype_is_float(datatype)) return result / size;
    return (double)((long long)result / size); /* integers: the sum divided toward zero */
  }
  return result;
}

int reduction_matches(int datatype, int op, double got, double expected) {
  if (op == COMM_AVG && datatype_is_float(datatype)) {
    double tolerance = datatype == COMM_FLOAT64 ? 1e-12 : datatype == COMM_FLOAT32 ? 1e-6 : 1e-2;
    return fabs(got - expected) <= tolerance * (fabs(expected) > 1 ? fabs(expected) : 1);
  }
  return got == round_to(datatype, expected);
}
