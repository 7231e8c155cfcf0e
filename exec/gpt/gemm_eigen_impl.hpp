// Eigen's GEMM behind kernels::gemm (exec/gpt/gemm.hpp): fp64 always, fp32 where oneDNN was not found.
#pragma once

#include "exec/gpt/gemm.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec::kernels {

template <class T>
void eigen_gemm(bool trans_a, bool trans_b, long M, long N, long K, T alpha, const T* a, long lda, const T* b,
                long ldb, T beta, T* c, long ldc) {
  using Strided = Eigen::Map<const Matrix<T>, 0, Eigen::OuterStride<>>;
  Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>> y(c, M, N, Eigen::OuterStride<>(ldc));
  if (beta == T(0))
    y.setZero();
  else if (beta != T(1))
    y *= beta;
  const Strided x(a, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  const Strided w(b, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  if (trans_a && trans_b)
    y.noalias() += alpha * x.transpose() * w.transpose();
  else if (trans_a)
    y.noalias() += alpha * x.transpose() * w;
  else if (trans_b)
    y.noalias() += alpha * x * w.transpose();
  else
    y.noalias() += alpha * x * w;
}

}  // namespace paratwin::exec::kernels
