// Blocks of DP buckets over their ranks (see dp_blocks.hpp).
#include "exec/train/dp_blocks.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

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

std::vector<ShardedRange> distinct_ranges(std::vector<ShardedRange> ranges) {
  const auto key = [](const ShardedRange& r) { return std::tuple(r.range, r.comm); };
  std::sort(ranges.begin(), ranges.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  ranges.erase(std::unique(ranges.begin(), ranges.end(),
                           [&](const auto& a, const auto& b) { return key(a) == key(b); }),
               ranges.end());
  return ranges;
}

Partition::Partition(const std::vector<ShardedRange>& parts, size_t total) {
  // Kept: everything but the other ranks' blocks of the parts.
  ParameterRanges others;
  for (const auto& [range, comm] : parts) {
    const std::vector<size_t> counts = dp_blocks(range, comm->size());
    size_t begin = range.first;
    for (int r = 0; r < comm->size(); ++r) {
      if (r != comm->rank() && counts[size_t(r)] > 0) others.push_back({begin, begin + counts[size_t(r)]});
      begin += counts[size_t(r)];
    }
  }
  std::sort(others.begin(), others.end());
  size_t at = 0, size = 0;
  for (const auto& o : others) {
    if (o.first > at) kept_.push_back({at, o.first});
    at = std::max(at, o.second);
  }
  if (at < total) kept_.push_back({at, total});
  for (const auto& [b, e] : kept_) size += e - b;
  values_.assign(size, 0.0f);
}

float* Partition::at(size_t offset) {
  size_t from = 0;
  for (const auto& [b, e] : kept_) {
    if (offset >= b && offset < e) return values_.data() + from + (offset - b);
    from += e - b;
  }
  throw std::logic_error("parameter " + std::to_string(offset) + " is not in this rank's partition");
}

void Partition::take(const float* whole) {
  float* to = values_.data();
  for (const auto& [b, e] : kept_) to = std::copy(whole + b, whole + e, to);
}

void Partition::put(float* whole) const {
  const float* from = values_.data();
  for (const auto& [b, e] : kept_) {
    std::copy(from, from + (e - b), whole + b);
    from += e - b;
  }
}

}  // namespace paratwin::exec
