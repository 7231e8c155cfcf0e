// Which tokens each rank trains on. The data stream is a sequence of global sequences (windows of
// seq_len + 1 tokens laid end to end over the corpus, wrapping around); step s takes sequences
// [s x global_batch, (s+1) x global_batch), and data-parallel rank r takes its contiguous share of
// them, micro-batch by micro-batch. So the data of a step does not depend on how many ranks share
// it, and a resumed run, with any number of ranks, sees what an uninterrupted one would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace paratwin::exec {

// One micro-batch's token ids and the targets of the loss, (B,T) each.
struct Batch {
  std::vector<int32_t> inputs, targets;
};

class DataLoader {
 public:
  // Throws InputError when the corpus holds fewer than seq_len + 1 tokens, or a token is outside the
  // vocabulary (`paratwin run` checks both before any rank starts: see exec/run/launch_checks.hpp).
  DataLoader(std::vector<uint16_t> tokens, int seq_len, int vocab);

  // The first global sequence of micro-batch `microbatch` of data-parallel rank `dp_rank` at step
  // `step`, each rank running `microbatches` of `micro_batch` sequences a step: the rule above.
  static int64_t first_sequence(int64_t step, int global_batch, int dp_rank, int microbatches, int microbatch,
                                int micro_batch) {
    return step * global_batch + (int64_t(dp_rank) * microbatches + microbatch) * micro_batch;
  }
  // Fills inputs and targets (B,T) with global sequences first, first + 1, ..., first + B - 1.
  void fill(int64_t first_sequence, int B, int32_t* inputs, int32_t* targets) const;
  // The same, into a batch of its own.
  Batch batch(int64_t first_sequence, int B) const;

  int64_t sequences_per_epoch() const { return per_epoch_; }
  size_t tokens() const { return tokens_.size(); }

 private:
  std::vector<uint16_t> tokens_;
  int seq_len_;
  int64_t per_epoch_;
};

}  // namespace paratwin::exec
