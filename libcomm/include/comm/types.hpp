// Element types, reduction operators, devices, and Buffer: a non-owning view of the memory a
// call sends from or receives into. Every call takes Buffers, so the library sees types as
// (pointer, count, dtype, device) and never needs templates at the API.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace comm {

enum class DType { Int8, UInt8, Int32, UInt32, Int64, UInt64, Float16, BFloat16, Float32, Float64, Bool };
enum class ReduceOp { Sum, Product, Min, Max, Avg, BAnd, BOr, BXor };

enum class Collective {
  Broadcast,
  Reduce,
  AllReduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  AllToAllV,
  AllGatherV,
  ReduceScatterV,
  GatherV,
  ScatterV,
  Barrier
};

struct Device {
  enum class Kind { Cpu, Cuda } kind = Kind::Cpu;
  int index = 0;
};

namespace detail {
// By DType's order (checked where it is used): a table, where a switch cost every call about
// ten instructions more.
inline constexpr std::uint8_t kElementSizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1};
static_assert(std::size(kElementSizes) == static_cast<std::size_t>(DType::Bool) + 1);
}  // namespace detail

// 0 for a value outside the enumeration. Inline: every call's checks and sizes ask for it.
constexpr std::size_t element_size(DType dtype) {
  auto index = static_cast<std::size_t>(dtype);
  return index < std::size(detail::kElementSizes) ? detail::kElementSizes[index] : 0;
}
const char* to_string(DType dtype);
const char* to_string(ReduceOp op);
const char* to_string(Collective collective);  // "all_reduce", as the call is named
std::string to_string(Device device);

// The C++ types whose dtype Buffer can deduce.
template <class T>
struct DTypeOf;
// One line per type: the table it is.
// clang-format off
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::Int8; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<std::uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
// clang-format on

template <class T>
concept Element = requires {
  DTypeOf<std::remove_const_t<T>>::value;
};

struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::UInt8;
  Device device{};

  Buffer(void* data, std::size_t count, DType dtype, Device device = {})
      : data(data), count(count), dtype(dtype), device(device) {}
  template <class T>
  requires Element<T> Buffer(std::span<T> elements)  // NOLINT(google-explicit-constructor): views convert implicitly
      : data(const_cast<std::remove_const_t<T>*>(elements.data())),
        count(elements.size()),
        dtype(DTypeOf<std::remove_const_t<T>>::value) {}
  template <class T>
  requires Element<T> Buffer(std::vector<T>& elements)  // NOLINT(google-explicit-constructor)
      : Buffer(std::span<T>(elements)) {}

  std::size_t bytes() const { return count * element_size(dtype); }
};

}  // namespace comm
