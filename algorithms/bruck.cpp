#include "algorithms/bruck.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/direct.hpp"

namespace comm::algorithms {

void bruck_all_to_all_v(const CollectiveContext& context, void* output, std::span<const std::size_t> output_counts,
                        const void* input, std::span<const std::size_t> input_counts, std::size_t element) {
  auto n = static_cast<std::size_t>(context.size);
  auto me = static_cast<std::size_t>(context.rank);
  const auto* in = static_cast<const std::uint8_t*>(input);
  // pieces[k]: the block held for rank me + k (mod n); a block moves by 2^j for each bit j of
  // k, so after the last step pieces[k] is the block from rank me - k, destined here.
  std::vector<std::vector<std::uint8_t>> pieces(n);
  std::vector<std::size_t> input_at = block_offsets(input_counts, element);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t to = (me + k) % n;
    pieces[k].assign(in + input_at[to], in + input_at[to + 1]);
  }
  std::vector<std::uint64_t> sizes_out, sizes_in;
  std::vector<std::uint8_t> bytes_out, bytes_in;
  std::uint64_t step = 0;
  for (std::size_t bit = 1; bit < n; bit <<= 1, step += 2) {
    int to = context.wrap(context.rank + static_cast<int>(bit));
    int from = context.wrap(context.rank - static_cast<int>(bit));
    sizes_out.clear();
    bytes_out.clear();
    for (std::size_t k = bit; k < n; ++k) {
      if ((k & bit) == 0) continue;
      sizes_out.push_back(pieces[k].size());
      bytes_out.insert(bytes_out.end(), pieces[k].begin(), pieces[k].end());
    }
    sizes_in.assign(sizes_out.size(), 0);
    std::size_t header = sizes_out.size() * sizeof(std::uint64_t);
    context.exchange(to, sizes_out.data(), header, from, sizes_in.data(), header, step);
    std::size_t total = 0;
    for (std::uint64_t size : sizes_in) total += size;
    bytes_in.resize(total);
    context.exchange(to, bytes_out.data(), bytes_out.size(), from, bytes_in.data(), total, step + 1);
    std::size_t at = 0, index = 0;
    for (std::size_t k = bit; k < n; ++k) {
      if ((k & bit) == 0) continue;
      std::size_t size = sizes_in[index++];
      pieces[k].assign(bytes_in.begin() + static_cast<std::ptrdiff_t>(at),
                       bytes_in.begin() + static_cast<std::ptrdiff_t>(at + size));
      at += size;
    }
  }
  auto* out = static_cast<std::uint8_t*>(output);
  std::size_t output_at = 0;
  for (std::size_t from = 0; from < n; ++from) {
    const std::vector<std::uint8_t>& piece = pieces[(me + n - from) % n];
    std::size_t expected = output_counts[from] * element;
    if (piece.size() != expected) {
      throw_block_mismatch(context, static_cast<int>(from), piece.size() / element, output_counts[from]);
    }
    if (expected > 0) std::memcpy(out + output_at, piece.data(), expected);
    output_at += expected;
  }
}

}  // namespace comm::algorithms
