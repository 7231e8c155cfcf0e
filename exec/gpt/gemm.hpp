// The dense GEMMs of the live CPU backend (linear layers, the head and its gradients), row-major, on
// the rank's threads: oneDNN's sgemm (JIT-compiled kernels for the CPU it runs on) in fp32 where the
// build found oneDNN (gemm_dnnl.cpp), Eigen's otherwise and in fp64 (gemm_eigen.cpp).
#pragma once

namespace paratwin::exec::kernels {

// c (M,N) = alpha op(a) op(b) + beta c, every matrix row-major: op(a) is a (M,K), or a^T with a stored
// (K,M) when trans_a; op(b) is b (K,N), or b^T with b stored (N,K) when trans_b; lda, ldb, ldc are the
// distances between rows. beta 0 reads nothing of c.
void gemm(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
          const float* b, long ldb, float beta, float* c, long ldc);
void gemm(bool trans_a, bool trans_b, long M, long N, long K, double alpha, const double* a, long lda,
          const double* b, long ldb, double beta, double* c, long ldc);

// The library behind the fp32 GEMMs, for reports: "oneDNN 2.6.3" or "Eigen 3.4.0".
const char* gemm_library();

}  // namespace paratwin::exec::kernels
