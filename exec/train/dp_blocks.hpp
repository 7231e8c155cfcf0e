// How the ranks of a DP group share a range of the parameters: each owns one block of it (the blocks
// of a reduce-scatter and an all-gather, and what a rank's optimizer updates under ZeRO), and what one
// rank keeps of a buffer laid out as the parameters when it keeps its blocks only (ZeRO 2's gradients,
// ZeRO 3's weights).
#pragma once

#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec {

// Block sizes of a range of `n` values over `ranks` ranks: as even as possible, the first ones one
// larger (the layout of the reduce-scatter and all-gather of a DP bucket).
std::vector<size_t> dp_blocks(std::pair<size_t, size_t> range, int ranks);

// A range of the parameters reduced, and under ZeRO sharded, over the ranks of `comm` (each owning
// its dp_blocks block): a DP bucket, or under expert parallelism a bucket's dense part (over the DP
// group) or this rank's experts in it (over the ranks that hold the same experts).
struct ShardedRange {
  std::pair<size_t, size_t> range;
  Communicator* comm = nullptr;
};
// This rank's blocks of the ranges, ascending, empty ones left out.
ParameterRanges owned_blocks(const std::vector<ShardedRange>& ranges);

// The distinct ranges of `ranges` (a DP bucket's parts, which tasks of every micro-batch name alike),
// in ascending order.
std::vector<ShardedRange> distinct_ranges(std::vector<ShardedRange> ranges);

// What one rank keeps of a buffer of `total` values laid out as its parameters, whose `parts` the ranks
// of each part's communicator share: its blocks of the parts and whatever no part covers, one after
// the other in a buffer of their own.
class Partition {
 public:
  Partition(const std::vector<ShardedRange>& parts, size_t total);

  const ParameterRanges& kept() const { return kept_; }  // ascending
  // The kept value at layout offset `offset` (the range after it up to the end of its kept range lies
  // beside it). Throws std::logic_error when this rank does not keep it.
  float* at(size_t offset);
  Buffer<float>& values() { return values_; }
  // Takes the kept values from `whole` (laid out as the parameters), or writes them into it.
  void take(const float* whole);
  void put(float* whole) const;

 private:
  ParameterRanges kept_;
  Buffer<float> values_;
};

}  // namespace paratwin::exec
