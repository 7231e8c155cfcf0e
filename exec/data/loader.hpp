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

class DataLoader {
 public:
  // Throws InputError when the corpus holds fewer than seq_len + 1 tokens, or a token is outside the
  // vocabulary (`paratwin run` checks both before any rank starts: see exec/run/launch_checks.hpp).
  DataLoader(std::vector<uint16_t> tokens, int seq_len, int vocab);

  // Fills inputs and targets (B,T) with global sequences first, first + 1, ..., first + B - 1.
  void fill(int64_t first_sequence, int B, int32_t* inputs, int32_t* targets) const;

  int64_t sequences_per_epoch() const { return per_epoch_; }
  size_t tokens() const { return tokens_.size(); }

 private:
  std::vector<uint16_t> tokens_;
  int seq_len_;
  int64_t per_epoch_;
};

}  // namespace paratwin::exec
