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
  // Under HSDP `replicas` is the group holding the same blocks in the other replicas: a reduced block
  // waits for sum_over_replicas() before it joins the partition. Throws std::logic_error when the parts
  // do not cover the shard.
  ShardedGradients(const std::vector<ShardedRange>& parts, size_t total, Communicator* replicas = nullptr);

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
  // freed (under HSDP kept for sum_over_replicas()).
  void reduced(int id);
  // HSDP: the reduced block of `part` summed over the replicas, in place. Returns an id for
  // replicas_summed(); throws std::logic_error when `part` has no reduced block waiting.
  int sum_over_replicas(Range part, std::vector<std::pair<Communicator*, Communicator::Handle>>& requests);
  // That sum has ended: the block added into the partition, its buffer freed.
  void replicas_summed(int id);

  // The partition's gradient at layout offset `offset` onwards (this rank's block of a part, which
  // the optimizer reads). Throws std::logic_error for an offset it does not hold.
  float* at(size_t offset) { return partition_.at(offset); }

 private:
  struct Reduction {
    Range part;
    Communicator* comm;
    Buffer<float> values;
    size_t from = 0, size = 0;  // this rank's block of the part, once reduced
    bool block_only = false;    // `values` holds that block alone (HSDP, waiting for the replicas)
  };
  void add_to_partition(const Reduction& r);

  Partition partition_;
  Communicator* replicas_;
  LayoutWindows windows_;
  std::map<size_t, Buffer<float>> open_;  // part begin -> its window's buffer
  std::map<int, Reduction> reducing_;     // reduce-scatters, then under HSDP the replicas' sums
  std::map<size_t, Reduction> reduced_;   // HSDP: part begin -> its reduced block, until summed
  int next_ = 0;
};

}  // namespace paratwin::exec
