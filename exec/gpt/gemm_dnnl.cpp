// kernels::gemm on oneDNN (see gemm.hpp): its sgemm takes row-major matrices as they are, and runs on
// the OpenMP threads the rank set (exec/threads.hpp).
#include <stdexcept>
#include <string>

#include <dnnl.h>

#include "exec/gpt/gemm_eigen_impl.hpp"

namespace paratwin::exec::kernels {

void gemm(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
          const float* b, long ldb, float beta, float* c, long ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("oneDNN sgemm of " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                             std::to_string(K) + " failed with status " + std::to_string(int(status)));
}

void gemm(bool trans_a, bool trans_b, long M, long N, long K, double alpha, const double* a, long lda,
          const double* b, long ldb, double beta, double* c, long ldc) {
  eigen_gemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* gemm_library() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }();
  return name.c_str();
}

}  // namespace paratwin::exec::kernels
