// ZeRO 2 and 3 as DeepSpeed and FSDP run them: a rank holds its gradients as its partition (its
// blocks of the DP buckets' parts), summed over the DP group and accumulated over the micro-batches.
// A backward computes a span's gradients into unsharded windows of the model's layout (opened zeroed
// for it); the Program's reduce-scatter of that span and micro-batch sums them over the group, adds
// this rank's block into the partition and frees them.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/layout_windows.hpp"
#include "exec/tensor.hpp"
#include "exec/train/dp_blocks.hpp"

namespace paratwin::exec {

class ShardedGradients {
 public:
  using Range = std::pair<size_t, size_t>;
  // `parts`: the DP buckets' distinct parts over a shard of `total` parameters (they must cover it).
  // Throws std::logic_error when they do not.
  ShardedGradients(const std::vector<ShardedRange>& parts, size_t total);

  // The windows the unsharded gradients are open in (the model writes its gradients there).
  const LayoutWindows& windows() const { return windows_; }

  void zero();  // the partition, at the start of a step

  // A backward is about to add gradients of `part` (one of the parts): a zeroed window for it, unless
  // one is open (a tied head's gradient, added by an earlier backward of the same micro-batch).
  void open(Range part);
  // The reduce-scatter of an open `part` over `comm` starts: the window closes (a later backward opens
  // a fresh one) and its buffer stays with the reduction. Returns an id for reduced().
  int reduce(Range part, Communicator* comm,
             std::vector<std::pair<Communicator*, Communicator::Handle>>& requests);
  // The reduction `id` has ended: this rank's block of its sum added into the partition, its buffer
  // freed.
  void reduced(int id);

  // The partition's gradient at layout offset `offset` onwards (this rank's block of a part, which
  // the optimizer reads). Throws std::logic_error for an offset it does not hold.
  float* at(size_t offset) { return partition_.at(offset); }

 private:
  struct Reduction {
    Range part;
    Communicator* comm;
    Buffer<float> values;
  };
  Partition partition_;
  LayoutWindows windows_;
  std::map<size_t, Buffer<float>> open_;  // part begin -> its window's buffer
  std::map<int, Reduction> reducing_;
  int next_ = 0;
};

}  // namespace paratwin::exec
