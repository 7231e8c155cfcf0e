// kernels::gemm on oneDNN (see gemm.hpp): its sgemm takes row-major matrices as they are, and runs on
// the OpenMP threads the rank set (exec/threads.hpp). On several threads the product is cut into
// pieces of output columns (or rows), each a one-thread sgemm, handed out to the threads as they come
// free: on a machine whose cores other processes share, a thread that loses its core for a while leaves
// its pieces to the others instead of holding up the product (oneDNN's own split is static). The cut
// runs across the larger operand, so each piece re-reads only the smaller one.
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include <dnnl.h>
#include <omp.h>
#include <dnnl.hpp>

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

// oneDNN's matmul primitive (its brgemm kernels) where it beats sgemm: b transposed and a long inner
// dimension, the input gradients of the QKV and first MLP projections (on one Zen 4 core 256 x 768 x
// 3072 runs at 107 GFLOP/s against sgemm's 98, 256 x 768 x 2304 at 107 against 103; with b as it is,
// or a short K, sgemm is as fast or faster). A primitive is compiled once per shape and thread.
constexpr long kMatmulMinK = 2048;
constexpr long kMatmulColumns = 128;  // 256 x 128 x 3072 pieces: 112 GFLOP/s on one core

bool matmul_fits(bool trans_a, bool trans_b, long K, float alpha, float beta) {
  return !trans_a && trans_b && K >= kMatmulMinK && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
}

void matmul(long M, long N, long K, const float* a, long lda, const float* b, long ldb, float beta, float* c,
            long ldc) {
  using dnnl::memory;
  using Key = std::tuple<long, long, long, long, long, long, bool>;
  struct Compiled {
    memory::desc a, b, c;
    dnnl::matmul product;
  };
  thread_local dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  thread_local dnnl::stream stream(engine);
  thread_local std::map<Key, Compiled> compiled;
  const Key key{M, N, K, lda, ldb, ldc, beta != 0.0f};
  auto it = compiled.find(key);
  if (it == compiled.end()) {
    // c (M,N) [+]= a (M,K) . b^T, b stored (N,K): its (K,N) view has strides (1, ldb).
    const memory::desc ad({M, K}, memory::data_type::f32, memory::dims{lda, 1});
    const memory::desc bd({K, N}, memory::data_type::f32, memory::dims{1, ldb});
    const memory::desc cd({M, N}, memory::data_type::f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (beta != 0.0f) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, engine);
    it = compiled.emplace(key, Compiled{ad, bd, cd, dnnl::matmul(pd)}).first;
  }
  const Compiled& m = it->second;
  memory am(m.a, engine, const_cast<float*>(a)), bm(m.b, engine, const_cast<float*>(b)), cm(m.c, engine, c);
  m.product.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

// One product on the calling thread (or, outside a parallel region, on oneDNN's threads).
void product(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a, long lda,
             const float* b, long ldb, float beta, float* c, long ldc) {
  if (matmul_fits(trans_a, trans_b, K, alpha, beta))
    matmul(M, N, K, a, lda, b, ldb, beta, c, ldc);
  else
    sgemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
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
  if (matmul_fits(trans_a, trans_b, K, alpha, beta) && std::min(a_size, b_size) <= kSmallOperand) {
    // Pieces of kMatmulColumns on any number of threads: each column of c comes from the same
    // primitive whatever the threads, so 1 and 2 threads give the same bits (and on one core the
    // 128-column pieces run faster than the whole product).
    parallel_for(N, kMatmulColumns, [&](long j0, long j1) {
      matmul(M, j1 - j0, K, a, lda, b + j0 * ldb, ldb, beta, c + j0, ldc);
    });
    return;
  }
  if (threads == 1 || std::min(a_size, b_size) > kSmallOperand) {
    product(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (a_size <= b_size) {  // columns of c: each piece reads all of a and its columns of b
    parallel_for(N, piece(N, threads), [&](long j0, long j1) {
      product(trans_a, trans_b, M, j1 - j0, K, alpha, a, lda, trans_b ? b + j0 * ldb : b + j0, ldb, beta,
              c + j0, ldc);
    });
  } else {  // rows of c: each piece reads its rows of a and all of b
    parallel_for(M, piece(M, threads), [&](long i0, long i1) {
      product(trans_a, trans_b, i1 - i0, N, K, alpha, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb, beta,
              c + i0 * ldc, ldc);
    });
  }
}

void gemm(bool trans_a, bool trans_b, long M, long N, long K, double alpha, const double* a, long lda,
          const double* b, long ldb, double beta, double* c, long ldc) {
  eigen_gemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_one_thread(bool trans_a, bool trans_b, long M, long N, long K, float alpha, const float* a,
                     long lda, const float* b, long ldb, float beta, float* c, long ldc) {
  // Inside the rank's parallel region oneDNN runs on the calling thread; outside it (one piece of
  // work, run inline) it would take all of the rank's threads, so they are set to one for the call.
  if (omp_in_parallel() || omp_get_max_threads() == 1) {
    sgemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    sgemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  } catch (...) {
    omp_set_num_threads(threads);
    throw;
  }
  omp_set_num_threads(threads);
}

void gemm_one_thread(bool trans_a, bool trans_b, long M, long N, long K, double alpha, const double* a,
                     long lda, const double* b, long ldb, double beta, double* c, long ldc) {
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
