// ZeRO stage 3 for one rank of a tensor/pipeline-parallel run: of each DP bucket of its shard the rank
// owns one block; the rest of a parameter range exists only while a pass that needs it runs, gathered
// by the Program's "AG dp params ..." task of that range (a chunk, or whatever layers a task names) and
// dropped when the pass has ended. Gathers are issued in the Program's order; a gather whose range
// overlaps one still in use waits until that pass has dropped it.
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec {

class Zero3Gathers {
 public:
  using Range = std::pair<size_t, size_t>;
  // `params`: the shard's parameter buffer (whole at construction); `buckets`: the DP buckets over it,
  // each split by dp_blocks over the ranks of `comm`, a DP group used for nothing else (its collectives
  // are issued when a range becomes free, in the same order on every member). Drops what this rank does
  // not own.
  Zero3Gathers(Buffer<float>& params, std::vector<Range> buckets, std::unique_ptr<Communicator> comm);

  // A pass needs parameters [begin, end): returns a ticket for ready()/wait(). Counts the bytes.
  int request(Range range);
  bool ready(int ticket);  // true once its gather has ended (issues what it can)
  void wait(int ticket);   // throws std::logic_error if the ticket cannot be issued (a pass holds it)
  // A pass has ended, and with it the use of every gathered range inside `done`: those are dropped.
  void release(Range done);
  // Collective over the group: every bucket whole in the buffer (a checkpoint reads the weights). Only
  // between steps, when no range is gathered.
  void gather_everything();

  double bytes() const { return bytes_; }  // gathered so far (whole messages)

 private:
  struct Gather {
    int ticket;
    Range range;
    bool issued = false;
    std::vector<Communicator::Handle> requests;
  };
  void issue();
  void drop(Range range);
  Gather* find(int ticket);

  Buffer<float>& params_;
  std::vector<Range> buckets_;
  std::unique_ptr<Communicator> comm_;
  std::deque<Gather> gathers_;  // requested and not released, in request order
  int next_ticket_ = 0;
  double bytes_ = 0;
};

}  // namespace paratwin::exec
