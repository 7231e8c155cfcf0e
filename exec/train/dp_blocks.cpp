// Blocks of DP buckets over their ranks (see dp_blocks.hpp).
#include "exec/train/dp_blocks.hpp"

#include <algorithm>

namespace paratwin::exec {

std::vector<size_t> dp_blocks(std::pair<size_t, size_t> range, int ranks) {
  const size_t n = range.second - range.first, dp = size_t(ranks);
  std::vector<size_t> counts(dp);
  for (size_t r = 0; r < dp; ++r) counts[r] = n / dp + (r < n % dp ? 1 : 0);
  return counts;
}

ParameterRanges owned_blocks(const std::vector<ShardedRange>& ranges) {
  ParameterRanges out;
  for (const auto& [range, comm] : ranges) {
    const std::vector<size_t> counts = dp_blocks(range, comm->size());
    size_t begin = range.first;
    for (int k = 0; k < comm->rank(); ++k) begin += counts[size_t(k)];
    if (counts[size_t(comm->rank())] > 0) out.push_back({begin, begin + counts[size_t(comm->rank())]});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace paratwin::exec
