// Context parallelism: the load-balanced causal split of a sequence over the CP group, and attention
// over keys and values all-gathered from the group (their gradients reduce-scattered back).
#include "exec/gpt/context_parallel.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "exec/gpt/kernel_clock.hpp"

namespace paratwin::exec {

std::vector<int> context_positions(int seq_len, int cp, int rank) {
  if (cp < 1 || rank < 0 || rank >= cp)
    throw std::invalid_argument("context parallel rank " + std::to_string(rank) + " of " +
                                std::to_string(cp));
  if (seq_len % (2 * cp) != 0)
    throw std::invalid_argument("context parallelism " + std::to_string(cp) + " splits each sequence into " +
                                std::to_string(2 * cp) + " chunks: seq_len " + std::to_string(seq_len) +
                                " must be a multiple of " + std::to_string(2 * cp));
  // Chunk i from the front and chunk 2cp-1-i from the back: the causal mask gives every rank the same
  // number of (query, key) pairs. With cp = 1 the two chunks are the whole sequence in order.
  const int chunk = seq_len / (2 * cp);
  std::vector<int> out;
  out.reserve(size_t(2 * chunk));
  for (int c : {rank, 2 * cp - 1 - rank})
    for (int t = 0; t < chunk; ++t) out.push_back(c * chunk + t);
  return out;
}

ContextParallel::ContextParallel(Communicator* group, int cp, int rank, int seq_len)
    : group_(group), cp_(cp), rank_(rank), seq_len_(seq_len) {
  if (cp > 1 && (!group || group->size() != cp))
    throw std::logic_error("context parallelism without a CP communicator of its size");
  for (int r = 0; r < cp; ++r) {
    positions_.push_back(context_positions(seq_len, cp, r));
    key_positions_.insert(key_positions_.end(), positions_.back().begin(), positions_.back().end());
  }
}

void ContextParallel::take(const int32_t* whole, int B, int32_t* local) const {
  const int Tl = local_len();
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) local[size_t(b) * Tl + t] = whole[size_t(b) * seq_len_ + positions()[t]];
}

double ContextParallel::sum(double value) {
  if (cp_ == 1) return value;
  const auto t0 = std::chrono::steady_clock::now();
  value = group_->allreduce_sum(value);
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return value;
}

void ContextParallel::attention_forward(float* out, float* att, float* kv, const float* qkv, int B, int H,
                                        int K, int D, const kernels::AttentionMask& mask) {
  // qkv (B,Tl,(H+2K)D) -> blocks (cp,B,Tl,2KD) gathered -> kv (B,T,2KD), T ordered by rank
  const int Tl = local_len(), T = seq_len_, width = (H + 2 * K) * D, KV = 2 * K * D;
  const size_t block = size_t(B) * Tl * KV;
  blocks_.resize(block * cp_);
  float* mine = blocks_.data() + block * rank_;
  for (size_t i = 0; i < size_t(B) * Tl; ++i)
    std::memcpy(mine + i * KV, qkv + i * width + size_t(H) * D, size_t(KV) * sizeof(float));
  if (cp_ > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    group_->wait(group_->start_allgather(blocks_.data(), std::vector<size_t>(size_t(cp_), block)));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  for (int r = 0; r < cp_; ++r)
    for (int b = 0; b < B; ++b)
      std::memcpy(kv + (size_t(b) * T + size_t(r) * Tl) * KV,
                  blocks_.data() + block * r + size_t(b) * Tl * KV, size_t(Tl) * KV * sizeof(float));
  attend(out, att, kv, qkv, B, H, K, D, mask);
}

void ContextParallel::attend(float* out, float* att, const float* kv, const float* qkv, int B, int H, int K,
                             int D, const kernels::AttentionMask& mask) const {
  const int Tl = local_len(), T = seq_len_, width = (H + 2 * K) * D, KV = 2 * K * D, group = H / K;
  const std::vector<int>& query_positions = positions();
  const float scale = 1.0f / std::sqrt(float(D));
  for (int b = 0; b < B; ++b) {
    const float* base = qkv + size_t(b) * Tl * width;
    const float* kvb = kv + size_t(b) * T * KV;
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      ConstStridedMap<float> q(base + h * D, Tl, D, Eigen::OuterStride<>(width));
      ConstStridedMap<float> k(kvb + g * D, T, D, Eigen::OuterStride<>(KV));
      ConstStridedMap<float> v(kvb + (K + g) * D, T, D, Eigen::OuterStride<>(KV));
      MatrixMap<float> p(att + (size_t(b) * H + h) * Tl * T, Tl, T);
      {
        KernelTimer timer(kernel_seconds.attention_s);
        p.noalias() = (q * k.transpose()) * scale;  // (Tl,T) scores
      }
      {
        KernelTimer timer(kernel_seconds.scores_s);
        // Softmax over the keys the mask leaves each query (at or before its position).
        for (int i = 0; i < Tl; ++i)
          kernels::masked_softmax_row(p.data() + size_t(i) * T, T, query_positions[i], key_positions_.data(),
                                      mask, h);
      }
      KernelTimer timer(kernel_seconds.attention_s);
      StridedMap<float>(out + size_t(b) * Tl * H * D + h * D, Tl, D, Eigen::OuterStride<>(H * D)).noalias() =
          p * v;
    }
  }
}

void ContextParallel::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* kv,
                                         const float* att, int B, int H, int K, int D) {
  const int Tl = local_len(), T = seq_len_, width = (H + 2 * K) * D, KV = 2 * K * D, group = H / K;
  const float scale = 1.0f / std::sqrt(float(D));
  MatrixMap<float>(dqkv, long(B) * Tl, width).setZero();
  dkv_.assign(size_t(B) * T * KV, 0.0f);  // (B,T,2KD): the whole sequence's, from this rank's queries
  Matrix<float> dp(Tl, T);
  for (int b = 0; b < B; ++b) {
    const float* base = qkv + size_t(b) * Tl * width;
    const float* kvb = kv + size_t(b) * T * KV;
    float* dbase = dqkv + size_t(b) * Tl * width;
    float* dkvb = dkv_.data() + size_t(b) * T * KV;
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      ConstStridedMap<float> q(base + h * D, Tl, D, Eigen::OuterStride<>(width));
      ConstStridedMap<float> k(kvb + g * D, T, D, Eigen::OuterStride<>(KV));
      ConstStridedMap<float> v(kvb + (K + g) * D, T, D, Eigen::OuterStride<>(KV));
      StridedMap<float> dq(dbase + h * D, Tl, D, Eigen::OuterStride<>(width));
      StridedMap<float> dk(dkvb + g * D, T, D, Eigen::OuterStride<>(KV));
      StridedMap<float> dv(dkvb + (K + g) * D, T, D, Eigen::OuterStride<>(KV));
      ConstMatrixMap<float> p(att + (size_t(b) * H + h) * Tl * T, Tl, T);
      ConstStridedMap<float> dy(dout + size_t(b) * Tl * H * D + h * D, Tl, D, Eigen::OuterStride<>(H * D));
      {
        KernelTimer timer(kernel_seconds.attention_s);
        dv.noalias() += p.transpose() * dy;  // (T,D)
        dp.noalias() = dy * v.transpose();   // (Tl,T)
      }
      {
        // Softmax backward per row (masked keys have p = 0, so their gradient is 0).
        KernelTimer timer(kernel_seconds.scores_s);
        for (int i = 0; i < Tl; ++i) {
          float dot = 0;
          for (int j = 0; j < T; ++j) dot += p(i, j) * dp(i, j);
          for (int j = 0; j < T; ++j) dp(i, j) = p(i, j) * (dp(i, j) - dot) * scale;
        }
      }
      KernelTimer timer(kernel_seconds.attention_s);
      dq.noalias() += dp * k;
      dk.noalias() += dp.transpose() * q;
    }
  }
  // (B,T,2KD) -> blocks (cp,B,Tl,2KD), summed over the group; this rank keeps its block.
  const size_t block = size_t(B) * Tl * KV;
  blocks_.resize(block * cp_);
  for (int r = 0; r < cp_; ++r)
    for (int b = 0; b < B; ++b)
      std::memcpy(blocks_.data() + block * r + size_t(b) * Tl * KV,
                  dkv_.data() + (size_t(b) * T + size_t(r) * Tl) * KV, size_t(Tl) * KV * sizeof(float));
  if (cp_ > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    group_->wait(group_->start_reduce_scatter_sum(blocks_.data(), std::vector<size_t>(size_t(cp_), block)));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const float* mine = blocks_.data() + block * rank_;
  for (size_t i = 0; i < size_t(B) * Tl; ++i)
    std::memcpy(dqkv + i * width + size_t(H) * D, mine + i * KV, size_t(KV) * sizeof(float));
}

}  // namespace paratwin::exec
