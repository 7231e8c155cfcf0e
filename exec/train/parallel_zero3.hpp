// ZeRO stage 3 for one rank of a live CPU run, as FSDP runs it: of each part of a DP bucket of its
// shard (the bucket itself; under expert parallelism its dense part, sharded over the DP group, and its
// experts, over the ranks that hold the same experts) the rank keeps one block (a Partition, with
// whatever no part covers). A pass's parameters (one layer, as the Program's "AG dp params ... L<l>"
// tasks name them) exist only while it runs: each gather allocates a copy of its ranges, fills it with
// the kept values and every other rank's blocks, and opens it as a window of the model's layout
// (exec/gpt/layout_windows.hpp); the pass that used it releases it, and the copy is freed. Gathers are
// issued in the order requested; one whose ranges overlap a copy still held waits until that copy is
// released. On one DP rank the partition is all of it, and a pass still runs on a copy beside it, as the
// Program allocates one.
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/layout_windows.hpp"
#include "exec/tensor.hpp"
#include "exec/train/dp_blocks.hpp"

namespace paratwin::exec {

class Zero3Gathers {
 public:
  using Range = std::pair<size_t, size_t>;
  // `params`: the shard's parameter buffer (whole at construction); `parts`: the DP buckets' distinct
  // parts over it, each split by dp_blocks over the ranks of its communicator, one of `groups`: groups
  // used for nothing else (their collectives are issued when a range becomes free, in the same order on
  // every member). Keeps what this rank owns and frees `params`.
  Zero3Gathers(Buffer<float>& params, std::vector<ShardedRange> parts,
               std::vector<std::unique_ptr<Communicator>> groups);

  // The windows the gathered copies are open in (the model reads its parameters there).
  const LayoutWindows& windows() const { return windows_; }

  // A pass needs the parameters of `ranges` (disjoint): returns a ticket for ready()/wait()/release().
  // Counts the bytes.
  int request(std::vector<Range> ranges);
  bool ready(int ticket);  // true once its gather has ended (issues what it can)
  void wait(int ticket);   // throws std::logic_error if the ticket cannot be issued (a pass holds it)
  // The pass that needed the ticket's parameters has ended: their copy goes.
  void release(int ticket);
  // Collective over the group: every bucket whole in `params` (a checkpoint reads the weights), until
  // the next gather or optimizer step. Only between steps, when no range is gathered.
  void gather_everything();

  // The kept values of parameter `begin` onwards (the optimizer updates them there): `begin` and the
  // range that follows lie in what this rank owns. Throws std::logic_error otherwise.
  float* shard(size_t begin);
  // Takes this rank's values from `whole`, laid out as the shard's parameter buffer (a checkpoint's).
  void assign(const float* whole);
  double bytes() const { return bytes_; }  // gathered so far (whole messages)

 private:
  struct Gather {
    int ticket;
    std::vector<Range> ranges;
    bool issued = false;
    std::vector<Buffer<float>> copies;  // one per range, while issued
    std::vector<std::pair<Communicator*, Communicator::Handle>> requests;
  };
  void issue();
  void start(Gather& g);
  Gather* find(int ticket);
  void fill(Range range, float* to);  // the kept values of `range` into its copy

  Buffer<float>& params_;
  size_t total_;
  std::vector<ShardedRange> parts_;
  std::vector<std::unique_ptr<Communicator>> groups_;  // the parts' communicators
  Partition kept_;
  LayoutWindows windows_;
  std::deque<Gather> gathers_;  // requested and not released, in request order
  int next_ticket_ = 0;
  double bytes_ = 0;
};

}  // namespace paratwin::exec
