// Row-major GEMM descriptions turned into cuBLASLt's column-major ones.
#include "exec/cuda/gemm_shape.hpp"

#include <stdexcept>
#include <string>

namespace paratwin::exec::cuda {

namespace {

void check_ld(const char* what, int64_t ld, int64_t row_length) {
  if (ld < row_length)
    throw std::invalid_argument(std::string("GEMM: leading dimension of ") + what + " is " +
                                std::to_string(ld) + ", shorter than its rows of " +
                                std::to_string(row_length));
}

void check_stride(const char* what, int batch, int64_t stride, int64_t elements) {
  if (batch > 1 && stride < elements)
    throw std::invalid_argument(std::string("GEMM: batch stride of ") + what + " is " +
                                std::to_string(stride) + ", smaller than one matrix of " +
                                std::to_string(elements) + " elements");
}

}  // namespace

ColumnMajorGemm to_column_major(const RowMajorGemm& g) {
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.batch <= 0)
    throw std::invalid_argument("GEMM: dimensions must be positive (M " + std::to_string(g.M) + ", N " +
                                std::to_string(g.N) + ", K " + std::to_string(g.K) + ", batch " +
                                std::to_string(g.batch) + ")");
  // Stored row-major shapes: A (M,K) or (K,M); B (K,N) or (N,K); D (M,N).
  const int64_t a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  const int64_t b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;
  check_ld("A", g.lda, a_cols);
  check_ld("B", g.ldb, b_cols);
  check_ld("D", g.ldd, g.N);
  check_stride("A", g.batch, g.stride_a, (a_rows - 1) * g.lda + a_cols);
  check_stride("B", g.batch, g.stride_b, (b_rows - 1) * g.ldb + b_cols);
  check_stride("D", g.batch, g.stride_d, (g.M - 1) * g.ldd + g.N);

  ColumnMajorGemm c;
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.trans_first = g.trans_b;
  c.trans_second = g.trans_a;
  // A row-major (rows, cols) matrix with row stride ld is a column-major (cols, rows) one with ld.
  c.first_rows = b_cols;
  c.first_cols = b_rows;
  c.first_ld = g.ldb;
  c.second_rows = a_cols;
  c.second_cols = a_rows;
  c.second_ld = g.lda;
  c.d_rows = g.N;
  c.d_cols = g.M;
  c.d_ld = g.ldd;
  c.batch = g.batch;
  c.stride_first = g.stride_b;
  c.stride_second = g.stride_a;
  c.stride_d = g.stride_d;
  return c;
}

RowMajorGemm linear_forward_gemm(int64_t N, int64_t C, int64_t OC) {
  RowMajorGemm g;
  g.M = N, g.N = OC, g.K = C;
  g.lda = C, g.ldb = OC, g.ldd = OC;
  return g;
}

RowMajorGemm linear_input_grad_gemm(int64_t N, int64_t C, int64_t OC) {
  RowMajorGemm g;
  g.M = N, g.N = C, g.K = OC;
  g.trans_b = true;  // weight is stored (C,OC); op(B) = weight^T is (OC,C)
  g.lda = OC, g.ldb = OC, g.ldd = C;
  return g;
}

RowMajorGemm linear_weight_grad_gemm(int64_t N, int64_t C, int64_t OC) {
  RowMajorGemm g;
  g.M = C, g.N = OC, g.K = N;
  g.trans_a = true;  // inp is stored (N,C); op(A) = inp^T is (C,N)
  g.lda = C, g.ldb = OC, g.ldd = OC;
  return g;
}

}  // namespace paratwin::exec::cuda
