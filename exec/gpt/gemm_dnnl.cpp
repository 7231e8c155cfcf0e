// kernels::gemm on oneDNN (see gemm.hpp): its sgemm takes row-major matrices as they are, and runs on
// the OpenMP threads the rank set (exec/threads.hpp). On several threads the product is cut into
// pieces of output columns (or rows), each a one-thread sgemm, handed out to the threads as they come
// free: on a machine whose cores other processes share, a thread that loses its core for a while leaves
// its pieces to the others instead of holding up the product (oneDNN's own split is static). The cut
// runs across the larger operand, so each piece re-reads only the smaller one.
#include <stdexcept>
#include <string>

#include <dnnl.h>

#include "exec/gpt/gemm_eigen_impl.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {

// Above this many elements in both operands a piece's re-read of one costs more than the static
// split: oneDNN's threads take the product (the head's input gradient, N x V . V x C).
constexpr long kSmallOperand = 4L << 20;

void sgemm(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
           const float* b, long ldb, float beta, float* c, long ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("oneDNN sgemm of " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                             std::to_string(K) + " failed with status " + std::to_string(int(status)));
}

// Pieces of `extent` rows or columns: about four per thread, 64 wide at least. (Inside the rank's
// parallel region oneDNN runs each piece on its calling thread alone.)
long piece(long extent, int threads) {
  const long target = (extent + 4L * threads - 1) / (4L * threads);
  return std::max(64L, (target + 63) / 64 * 64);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
          const float* b, long ldb, float beta, float* c, long ldc) {
  const int threads = rank_threads();
  const long a_size = M * K, b_size = K * N;
  if (threads == 1 || std::min(a_size, b_size) > kSmallOperand) {
    sgemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (a_size <= b_size) {  // columns of c: each piece reads all of a and its columns of b
    parallel_for(N, piece(N, threads), [&](long j0, long j1) {
      sgemm(trans_a, trans_b, M, j1 - j0, K, alpha, a, lda, trans_b ? b + j0 * ldb : b + j0, ldb, beta,
            c + j0, ldc);
    });
  } else {  // rows of c: each piece reads its rows of a and all of b
    parallel_for(M, piece(M, threads), [&](long i0, long i1) {
      sgemm(trans_a, trans_b, i1 - i0, N, K, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb, beta,
            c + i0 * ldc, ldc);
    });
  }
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
