#include "libcomm/base/fingerprint.hpp"

#include <algorithm>

namespace comm::detail {
namespace {

// The layout fingerprint() packs (fingerprint.hpp).
constexpr int kCollectiveShift = 60, kDTypeShift = 56, kOpShift = 52, kAlgorithmShift = 49, kRootShift = 39,
              kGpuShift = 38;
constexpr std::uint64_t kCountMask = (std::uint64_t{1} << 38) - 1;

std::uint64_t field(std::uint64_t fingerprint, int shift, int bits) {
  return (fingerprint >> shift) & ((std::uint64_t{1} << bits) - 1);
}

}  // namespace

std::string describe_fingerprint(std::uint64_t fingerprint) {
  auto collective = static_cast<int>(field(fingerprint, kCollectiveShift, 4)) - 1;
  if (collective < 0 || collective > static_cast<int>(Collective::Barrier)) return "a point-to-point message";
  auto dtype = static_cast<int>(field(fingerprint, kDTypeShift, 4)) - 1;
  auto op = static_cast<int>(field(fingerprint, kOpShift, 4)) - 1;
  auto algorithm = static_cast<Algorithm>(field(fingerprint, kAlgorithmShift, 3));
  auto root = static_cast<int>(field(fingerprint, kRootShift, 10)) - 1;
  std::string text = std::string(to_string(static_cast<Collective>(collective))) + "(";
  if (dtype >= 0) {
    text += std::string(to_string(static_cast<DType>(dtype))) + " x " + std::to_string(fingerprint & kCountMask) + ", ";
  }
  if (op >= 0) text += std::string(to_string(static_cast<ReduceOp>(op))) + ", ";
  if (root >= 0) text += "root " + std::to_string(root) + (root == 1021 ? "+" : "") + ", ";
  text += std::string(to_string(algorithm)) + (field(fingerprint, kGpuShift, 1) ? ", GPU buffers" : "") + ")";
  return text;
}

}  // namespace comm::detail
