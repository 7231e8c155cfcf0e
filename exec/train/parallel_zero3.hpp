// ZeRO stage 3 for one rank of a live CPU run: of each part of a DP bucket of
// its shard (the bucket itself; under expert parallelism its dense part, sharded over the DP group, and
// its experts, over the ranks that hold the same experts) the rank owns one block, kept in a buffer of
// its own with whatever no part covers. The rest of a parameter range exists only while a pass that
// needs it runs, gathered by the Program's "AG dp params ..." task of that range (a chunk, or whatever
// layers a task names) and dropped when the pass has ended. The shard's whole parameter buffer is
// allocated while any range is gathered and freed when none is (the gathered copy beside the shard
// that the Program allocates and frees). Gathers are issued in the Program's order; a gather whose
// range overlaps one still in use waits until that pass has dropped it. On one DP rank the shard is
// all of it, and a pass still runs on a copy beside it, as the Program allocates one.
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/tensor.hpp"
#include "exec/train/dp_blocks.hpp"

namespace paratwin::exec {

class Zero3Gathers {
 public:
  using Range = std::pair<size_t, size_t>;
  // `params`: the shard's parameter buffer (whole at construction); `parts`: the DP buckets' parts over
  // it, each split by dp_blocks over the ranks of its communicator, one of `groups`: groups used for
  // nothing else (their collectives are issued when a range becomes free, in the same order on every
  // member). Keeps what this rank owns and frees `params`.
  Zero3Gathers(Buffer<float>& params, std::vector<ShardedRange> parts,
               std::vector<std::unique_ptr<Communicator>> groups);

  // A pass needs parameters [begin, end): returns a ticket for ready()/wait(). Counts the bytes.
  int request(Range range);
  bool ready(int ticket);  // true once its gather has ended (issues what it can)
  void wait(int ticket);   // throws std::logic_error if the ticket cannot be issued (a pass holds it)
  // A pass has ended, and with it the use of every gathered range inside `done`: those are dropped.
  void release(Range done);
  // Collective over the group: every bucket whole in the buffer (a checkpoint reads the weights), until
  // the next pass ends. Only between steps, when no range is gathered.
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
    Range range;
    bool issued = false;
    std::vector<std::pair<Communicator*, Communicator::Handle>> requests;
  };
  void issue();
  void drop(Range range);
  Gather* find(int ticket);
  void allocate();  // the whole buffer again: NaN but for the kept values

  Buffer<float>& params_;
  size_t total_;
  std::vector<ShardedRange> parts_;
  std::vector<std::unique_ptr<Communicator>> groups_;  // the parts' communicators
  std::vector<Range> kept_;     // ascending: this rank's blocks and what no part covers
  Buffer<float> shard_;         // their values, one after the other
  std::deque<Gather> gathers_;  // requested and not released, in request order
  int next_ticket_ = 0;
  double bytes_ = 0;
};

}  // namespace paratwin::exec
