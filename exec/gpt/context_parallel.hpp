// Context parallelism (Megatron-LM's): each sequence of a micro-batch split over the CP group in the
// load-balanced causal way (2 x cp chunks, rank i takes chunks i and 2cp-1-i), and the attention of a
// rank's queries over the keys and values of the whole sequence, gathered over the group in the
// forward, their gradients reduce-scattered back in the backward. Everything else is token-local.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec {

// The positions in a sequence of `seq_len` tokens that CP rank `rank` of `cp` holds, in the order it
// holds them. Throws std::invalid_argument unless 2 x cp divides seq_len.
std::vector<int> context_positions(int seq_len, int cp, int rank);

class ContextParallel {
 public:
  // `group` is the CP group (size cp; may be null when cp is 1). Throws std::invalid_argument as
  // context_positions does.
  ContextParallel(Communicator* group, int cp, int rank, int seq_len);

  int size() const { return cp_; }
  int seq_len() const { return seq_len_; }
  int local_len() const { return seq_len_ / cp_; }
  // Sequence position of each local token (local_len of them).
  const std::vector<int>& positions() const { return positions_[size_t(rank_)]; }

  // (B,T) whole sequences -> (B,T/cp) this rank's tokens.
  void take(const int32_t* whole, int B, int32_t* local) const;
  // The sum of `value` over the group (the loss of a micro-batch).
  double sum(double value);

  // Attention of the local queries. qkv (B,Tl,(H+2K)D) holds this rank's queries, keys and values
  // (rotated by their real positions). Gathers the keys and values of the group into kv (B,T,2KD),
  // ordered by rank then local token, kept for the backward; out (B,Tl,H*D); att (B,H,Tl,T) the
  // probabilities, zero where a key's position is after the query's or outside `mask`.
  void attention_forward(float* out, float* att, float* kv, const float* qkv, int B, int H, int K, int D,
                         const kernels::AttentionMask& mask = {});
  // The same attention from keys and values gathered before (kv as attention_forward left it), without
  // a collective: selective recomputation redoes the probabilities and the output with the kept kv.
  void attend(float* out, float* att, const float* kv, const float* qkv, int B, int H, int K, int D,
              const kernels::AttentionMask& mask = {}) const;
  // dqkv (B,Tl,(H+2K)D) written: the queries' gradient, and the keys' and values' gradient summed over
  // the group's queries (reduce-scatter).
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* kv, const float* att,
                          int B, int H, int K, int D);

  double seconds = 0;  // wall time spent in CP collectives so far

 private:
  Communicator* group_;
  int cp_, rank_, seq_len_;
  std::vector<std::vector<int>> positions_;  // per rank
  std::vector<int> key_positions_;           // (T) in the gathered order
  Buffer<float> blocks_, dkv_;
};

}  // namespace paratwin::exec
