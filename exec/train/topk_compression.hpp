// Top-k gradient sparsification with error feedback (Stich et al. 2018; Lin et al. 2018, "Deep
// Gradient Compression"), per DP bucket: each rank adds the residual it kept to its gradient, sends
// the k largest entries by magnitude as (index, value) pairs, and keeps what it did not send as the
// next step's residual. Every rank all-gathers every rank's pairs and sums them, in rank order, into
// the bucket: the same dense sum on every rank. The first warmup_steps steps are dense all-reduces.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "exec/tensor.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::exec {

class TopKCompressor {
 public:
  // Throws std::invalid_argument for a ratio outside (0, 1].
  explicit TopKCompressor(const CompressionSpec& spec);

  // Whether `step` (0-based) exchanges dense gradients (the warm-up).
  bool dense(int64_t step) const { return step < spec_.warmup_steps; }
  // Pairs a rank sends for a bucket of n gradients: ratio x n rounded, at least 1.
  size_t pairs(size_t n) const;

  // The all-gather buffer of bucket `bucket` (its gradients grads[0, n)): `ranks` blocks of 2k floats
  // (k values, then k int32 indices stored in float slots), this rank's block filled. With error
  // feedback, updates the bucket's residual.
  Buffer<float> compress(int bucket, const float* grads, size_t n, int rank, int ranks);
  // The bucket's gradients as the sum of every rank's pairs in the gathered buffer.
  void decompress(const Buffer<float>& gathered, float* grads, size_t n, int ranks) const;

  // The residual of a bucket (empty before its first compressed step); tests and reports.
  const Buffer<float>& residual(int bucket) { return residual_[bucket]; }

 private:
  CompressionSpec spec_;
  std::map<int, Buffer<float>> residual_;  // bucket -> the gradient not sent yet
  std::vector<uint32_t> order_;            // scratch: indices by magnitude
};

}  // namespace paratwin::exec
