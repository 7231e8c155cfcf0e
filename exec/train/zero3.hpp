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

class Zero3Parameters {
 public:
  // `params`: the model's whole parameters (as initialized); `owned`: this rank's blocks of the
  // `buckets` (each bucket split by dp_blocks over the ranks of `comm`). Keeps the owned blocks and
  // frees `params`.
  Zero3Parameters(Buffer<float>& params, ParameterRanges owned, ParameterRanges buckets, Communicator& comm);

  // A pass needs the whole parameters: returns a ticket for ready()/wait().
  int request();
  bool ready(int ticket);  // true once its gather has ended (issues it when it can)
  void wait(int ticket);
  // The pass of the oldest ticket has ended: frees the parameters and issues the next gather.
  void pass_ended();

  // The shard's values of owned range [begin, end) (one of `owned`).
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
  ParameterRanges owned_, buckets_;
  Communicator& comm_;
  Buffer<float> shard_;
  std::map<size_t, size_t> shard_offset_;  // owned range begin -> offset in shard_
  std::deque<int> waiting_;                // tickets, oldest first
  int next_ticket_ = 0;
  int issued_ = -1;  // the ticket whose gather is issued (or done), -1: none
  std::vector<Communicator::Handle> requests_;
};

}  // namespace paratwin::exec
