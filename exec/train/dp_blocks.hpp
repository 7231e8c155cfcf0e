// How the ranks of a DP group share a range of the parameters: each owns one block of it (the blocks
// of a reduce-scatter and an all-gather, and what a rank's optimizer updates under ZeRO).
#pragma once

#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/optim/adamw.hpp"

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

}  // namespace paratwin::exec
