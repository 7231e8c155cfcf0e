// kernels::gemm on Eigen alone (see gemm.hpp), where the build found no oneDNN.
#include <string>

#include "exec/gpt/gemm_eigen_impl.hpp"

namespace paratwin::exec::kernels {

void gemm(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
          const float* b, long ldb, float beta, float* c, long ldc) {
  eigen_gemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, long M, long N, long K, double alpha, const double* a, long lda,
          const double* b, long ldb, double beta, double* c, long ldc) {
  eigen_gemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* gemm_library() {
  static const std::string name = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                                  std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                  std::to_string(EIGEN_MINOR_VERSION);
  return name.c_str();
}

}  // namespace paratwin::exec::kernels
