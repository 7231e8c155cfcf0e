// A shard's values against the whole model's: its initialization (each weight drawn at its index in
// the whole model, so every layout starts from the same weights) and the copies between a shard and a
// whole-model buffer (checkpoints, the CUDA tests' reference).
#include <algorithm>
#include <cstring>

#include "exec/gpt/init.hpp"
#include "exec/gpt/tensor_parallel.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec {

void ShardedGpt::initialize(uint64_t seed) {
  for (const ShardTensor& t : tensors_) {
    // The tied copy of wte draws wte's values: the same full offset, and wte's distribution.
    const InitialDistribution d = initial_distribution(t.tied_copy ? "wte" : t.name, full_.layers);
    parallel_for(long(t.rows), std::max(1L, (1L << 16) / long(t.cols)), [&](long r0, long r1) {
      for (long i = r0; i < r1; ++i) {
        float* out = params_.data() + t.offset + size_t(i) * t.cols;
        for (const auto& [a, b] : t.columns) {
          initial_weights(out, seed, t.full_offset + (t.row_begin + size_t(i)) * t.full_cols + a, b - a, d);
          out += b - a;
        }
      }
    });
  }
}

void ShardedGpt::take_shard(const float* full, float* shard) const {
  for (const ShardTensor& t : tensors_) {
    float* out = shard + t.offset;
    for (size_t i = 0; i < t.rows; ++i)
      for (const auto& [a, b] : t.columns) {
        std::memcpy(out, full + t.full_offset + (t.row_begin + i) * t.full_cols + a, (b - a) * sizeof(float));
        out += b - a;
      }
  }
}

void ShardedGpt::put_shard(const float* shard, float* full) const {
  for (const ShardTensor& t : tensors_) {
    if (t.tied_copy) continue;  // wte comes from the first stage
    const float* in = shard + t.offset;
    for (size_t i = 0; i < t.rows; ++i)
      for (const auto& [a, b] : t.columns) {
        std::memcpy(full + t.full_offset + (t.row_begin + i) * t.full_cols + a, in, (b - a) * sizeof(float));
        in += b - a;
      }
  }
}

}  // namespace paratwin::exec
