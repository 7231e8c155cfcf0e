// ZeRO stage 3 on one rank: the rank keeps only its blocks of the parameters (a shard); the whole
// parameters exist only while a pass runs, gathered from every rank's shard before it (the Program's
// "AG dp params F|B ..." tasks) and freed after it. One gathered copy exists at a time: a gather the
// Program starts early is issued when the pass before it has freed its copy.
#pragma once

#include <deque>
#include <map>
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

class Zero3Parameters {
 public:
  // `params`: the model's whole parameters (as initialized); `ranges`: what a pass gathers, each range
  // from the blocks its communicator's ranks own (owned_blocks(ranges) on this rank); `comm`: the DP
  // group, on which every parameter is owned by one rank. Keeps the owned blocks and frees `params`.
  Zero3Parameters(Buffer<float>& params, std::vector<ShardedRange> ranges, Communicator& comm);

  // A pass needs the whole parameters: returns a ticket for ready()/wait().
  int request();
  bool ready(int ticket);  // true once its gather has ended (issues it when it can)
  void wait(int ticket);
  // The pass of the oldest ticket has ended: frees the parameters and issues the next gather.
  void pass_ended();

  // This rank's blocks.
  const ParameterRanges& owned() const { return owned_; }
  // The shard's values of owned range [begin, end) (one of owned()).
  float* shard(size_t begin);
  // Collective (every rank of comm): the whole parameters, e.g. for a checkpoint.
  std::vector<float> gather_all();
  // Takes this rank's blocks of whole-model weights (a checkpoint's).
  void assign_full(const std::vector<float>& weights);
  // Collective: leaves the whole parameters in the model's buffer (the end of the run).
  void materialize();

 private:
  void issue();

  Buffer<float>& params_;
  size_t total_;  // parameters of the whole model
  std::vector<ShardedRange> ranges_;
  ParameterRanges owned_;
  Communicator& comm_;
  Buffer<float> shard_;
  std::map<size_t, size_t> shard_offset_;  // owned range begin -> offset in shard_
  std::deque<int> waiting_;                // tickets, oldest first
  int next_ticket_ = 0;
  int issued_ = -1;  // the ticket whose gather is issued (or done), -1: none
  std::vector<std::pair<Communicator*, Communicator::Handle>> requests_;
};

}  // namespace paratwin::exec
