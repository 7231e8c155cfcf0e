// Causal (grouped-query) self-attention: softmax(Q K^T / sqrt(D), with ALiBi's bias and within a
// sliding window where the layer has them) V per sequence and head, the probabilities kept for the
// backward. Per head the work is three small GEMMs handed to Eigen; the rank's threads take sequences
// and heads (the backward: key/value heads, whose gradients the heads of a group add into) apart.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exec/gpt/kernel_clock.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/tensor.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {

template <class T>
using RowArray = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;

// Causal softmax of each row i of p (T,T) over keys 0..i; later keys get probability 0.
template <class T>
void causal_softmax(MatrixMap<T>& p, int Tn) {
  for (int i = 0; i < Tn; ++i) {
    RowArray<T> row(p.data() + long(i) * Tn, i + 1);
    row = (row - row.maxCoeff()).exp();
    row /= row.sum();
    std::fill(p.data() + long(i) * Tn + i + 1, p.data() + long(i + 1) * Tn, T(0));
  }
}

// The same under a mask (masked_softmax_row for each query).
template <class T>
void masked_softmax(MatrixMap<T>& p, int Tn, const AttentionMask& mask, int head) {
  for (int i = 0; i < Tn; ++i) masked_softmax_row(p.data() + long(i) * Tn, Tn, i, nullptr, mask, head);
}

}  // namespace

template <class T>
void masked_softmax_row(T* row, int keys, int query, const int* key_positions, const AttentionMask& mask,
                        int head) {
  const auto at = [key_positions](int j) { return key_positions ? key_positions[j] : j; };
  T max = -std::numeric_limits<T>::infinity();
  for (int j = 0; j < keys; ++j)
    if (mask.attends(query, at(j))) max = std::max(max, row[j] += T(mask.bias(head, query, at(j))));
  T sum = 0;
  for (int j = 0; j < keys; ++j) sum += (row[j] = mask.attends(query, at(j)) ? std::exp(row[j] - max) : T(0));
  for (int j = 0; j < keys; ++j) row[j] /= sum;
}

template void masked_softmax_row<float>(float*, int, int, const int*, const AttentionMask&, int);
template void masked_softmax_row<double>(double*, int, int, const int*, const AttentionMask&, int);

std::vector<double> alibi_slopes(int heads) {
  const auto power_of_two = [](int n) {
    std::vector<double> s;
    for (int i = 1; i <= n; ++i) s.push_back(std::pow(2.0, -8.0 * i / n));
    return s;
  };
  int below = 1;
  while (below * 2 <= heads) below *= 2;
  std::vector<double> slopes = power_of_two(below);
  const std::vector<double> twice = power_of_two(2 * below);
  for (int i = 0; int(slopes.size()) < heads; i += 2) slopes.push_back(twice[size_t(i)]);
  return slopes;
}

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int H, int K, int D,
                       const AttentionMask& mask) {
  // qkv is (B,T,(H+2K)D), out is (B,T,H*D), att is (B,H,T,T)
  const int width = (H + 2 * K) * D, group = H / K;
  const T scale = T(1) / std::sqrt(T(D));
  parallel_for(long(B) * H, 1, [&](long first, long last) {
    for (long bh = first; bh < last; ++bh) {
      const int b = int(bh / H), h = int(bh % H), g = h / group;
      const T* base = qkv + static_cast<long>(b) * Tn * width;
      ConstStridedMap<T> q(base + h * D, Tn, D, Eigen::OuterStride<>(width));
      ConstStridedMap<T> k(base + (H + g) * D, Tn, D, Eigen::OuterStride<>(width));
      ConstStridedMap<T> v(base + (H + K + g) * D, Tn, D, Eigen::OuterStride<>(width));
      MatrixMap<T> p(att + bh * Tn * Tn, Tn, Tn);
      {
        KernelTimer timer(kernel_seconds.attention_s);
        p.noalias() = (q * k.transpose()) * scale;  // (T,T) scores
      }
      {
        KernelTimer timer(kernel_seconds.scores_s);
        if (mask.plain())
          causal_softmax(p, Tn);
        else
          masked_softmax(p, Tn, mask, h);
      }
      KernelTimer timer(kernel_seconds.attention_s);
      StridedMap<T>(out + static_cast<long>(b) * Tn * H * D + h * D, Tn, D, Eigen::OuterStride<>(H * D))
          .noalias() = p * v;
    }
  });
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int H, int K,
                        int D) {
  // dout is (B,T,H*D); qkv and dqkv are (B,T,(H+2K)D); att is (B,H,T,T)
  const int width = (H + 2 * K) * D, group = H / K;
  const T scale = T(1) / std::sqrt(T(D));
  MatrixMap<T>(dqkv, static_cast<long>(B) * Tn, width).setZero();  // key/value heads sum over their group
  parallel_for(long(B) * K, 1, [&](long first, long last) {
    Matrix<T> dp(Tn, Tn);
    for (long bg = first; bg < last; ++bg) {
      const int b = int(bg / K), g = int(bg % K);
      const T* base = qkv + static_cast<long>(b) * Tn * width;
      T* dbase = dqkv + static_cast<long>(b) * Tn * width;
      ConstStridedMap<T> k(base + (H + g) * D, Tn, D, Eigen::OuterStride<>(width));
      ConstStridedMap<T> v(base + (H + K + g) * D, Tn, D, Eigen::OuterStride<>(width));
      StridedMap<T> dk(dbase + (H + g) * D, Tn, D, Eigen::OuterStride<>(width));
      StridedMap<T> dv(dbase + (H + K + g) * D, Tn, D, Eigen::OuterStride<>(width));
      for (int h = g * group; h < (g + 1) * group; ++h) {
        ConstStridedMap<T> q(base + h * D, Tn, D, Eigen::OuterStride<>(width));
        StridedMap<T> dq(dbase + h * D, Tn, D, Eigen::OuterStride<>(width));
        ConstMatrixMap<T> p(att + (static_cast<long>(b) * H + h) * Tn * Tn, Tn, Tn);
        ConstStridedMap<T> dy(dout + static_cast<long>(b) * Tn * H * D + h * D, Tn, D,
                              Eigen::OuterStride<>(H * D));
        {
          KernelTimer timer(kernel_seconds.attention_s);
          dv.noalias() += p.transpose() * dy;  // (T,D)
          dp.noalias() = dy * v.transpose();   // (T,T) gradient of the probabilities
        }
        // Softmax backward per row: ds = p * (dp - sum_j p dp), then the 1/sqrt(D) of the scores.
        {
          KernelTimer timer(kernel_seconds.scores_s);
          for (int i = 0; i < Tn; ++i) {
            T dot = 0;
            for (int j = 0; j <= i; ++j) dot += p(i, j) * dp(i, j);
            for (int j = 0; j <= i; ++j) dp(i, j) = p(i, j) * (dp(i, j) - dot) * scale;
            for (int j = i + 1; j < Tn; ++j) dp(i, j) = 0;
          }
        }
        KernelTimer timer(kernel_seconds.attention_s);
        dq.noalias() += dp * k;
        dk.noalias() += dp.transpose() * q;
      }
    }
  });
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int, int,
                                       const AttentionMask&);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int, int,
                                        const AttentionMask&);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int,
                                        int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int,
                                         int, int);

}  // namespace paratwin::exec::kernels
