// Causal (grouped-query) self-attention: softmax(Q K^T / sqrt(D)) V per sequence and head, the
// probabilities kept for the backward. Per head the work is small GEMMs on the calling thread; the
// rank's threads take sequences and heads (the backward: key/value heads, whose gradients the heads
// of a group add into) apart.
#include <cmath>
#include <limits>

#include "exec/gpt/gemm.hpp"
#include "exec/gpt/gemm_clock.hpp"
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

}  // namespace

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int H, int K, int D) {
  // qkv is (B,T,(H+2K)D), out is (B,T,H*D), att is (B,H,T,T)
  const int width = (H + 2 * K) * D, group = H / K;
  const T scale = T(1) / std::sqrt(T(D));
  parallel_for(long(B) * H, 1, [&](long first, long last) {
    for (long bh = first; bh < last; ++bh) {
      const int b = int(bh / H), h = int(bh % H), g = h / group;
      const T* base = qkv + static_cast<long>(b) * Tn * width;
      const T* q = base + h * D;
      const T* k = base + (H + g) * D;
      const T* v = base + (H + K + g) * D;
      T* p = att + bh * Tn * Tn;
      {
        GemmTimer timer(gemm_seconds.attention_s);
        gemm_one_thread(false, true, Tn, Tn, D, scale, q, width, k, width, T(0), p, Tn);  // (T,T) scores
      }
      MatrixMap<T> probabilities(p, Tn, Tn);
      causal_softmax(probabilities, Tn);
      GemmTimer timer(gemm_seconds.attention_s);
      gemm_one_thread(false, false, Tn, D, Tn, T(1), p, Tn, v, width, T(0),
                      out + static_cast<long>(b) * Tn * H * D + h * D, H * D);  // P V
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
    Matrix<T> dp_buffer(Tn, Tn);
    T* dp = dp_buffer.data();  // (T,T) gradient of the probabilities, then of the scores
    for (long bg = first; bg < last; ++bg) {
      const int b = int(bg / K), g = int(bg % K);
      const T* base = qkv + static_cast<long>(b) * Tn * width;
      T* dbase = dqkv + static_cast<long>(b) * Tn * width;
      const T* k = base + (H + g) * D;
      const T* v = base + (H + K + g) * D;
      T* dk = dbase + (H + g) * D;
      T* dv = dbase + (H + K + g) * D;
      for (int h = g * group; h < (g + 1) * group; ++h) {
        const T* q = base + h * D;
        T* dq = dbase + h * D;
        const T* p = att + (static_cast<long>(b) * H + h) * Tn * Tn;
        const T* dy = dout + static_cast<long>(b) * Tn * H * D + h * D;
        {
          GemmTimer timer(gemm_seconds.attention_s);
          gemm_one_thread(true, false, Tn, D, Tn, T(1), p, Tn, dy, H * D, T(1), dv, width);  // dv += P^T dy
          gemm_one_thread(false, true, Tn, Tn, D, T(1), dy, H * D, v, width, T(0), dp, Tn);  // dP = dy V^T
        }
        // Softmax backward per row: ds = p * (dp - sum_j p dp), then the 1/sqrt(D) of the scores.
        for (int i = 0; i < Tn; ++i) {
          const T* pi = p + long(i) * Tn;
          T* di = dp + long(i) * Tn;
          T dot = 0;
          for (int j = 0; j <= i; ++j) dot += pi[j] * di[j];
          for (int j = 0; j <= i; ++j) di[j] = pi[j] * (di[j] - dot) * scale;
          for (int j = i + 1; j < Tn; ++j) di[j] = 0;
        }
        GemmTimer timer(gemm_seconds.attention_s);
        gemm_one_thread(false, false, Tn, D, Tn, T(1), dp, Tn, k, width, T(1), dq, width);  // dq += dS K
        gemm_one_thread(true, false, Tn, D, Tn, T(1), dp, Tn, q, width, T(1), dk, width);   // dk += dS^T Q
      }
    }
  });
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int, int, int, int,
                                        int);
template void attention_backward<double>(double*, const double*, const double*, const double*, int, int, int,
                                         int, int);

}  // namespace paratwin::exec::kernels
