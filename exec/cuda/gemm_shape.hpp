// The GEMMs of the model are written row-major, as on CPU (out (N,OC) = inp (N,C) . weight (C,OC));
// cuBLASLt is column-major. This maps one to the other. Plain C++ (no CUDA), so it is unit tested on
// any machine: the mapping is where a GEMM goes wrong silently.
#pragma once

#include <cstdint>

namespace paratwin::exec::cuda {

// D (M,N) = alpha * op(A) (M,K) . op(B) (K,N) + beta * D, all row-major. A is stored (M,K), or (K,M)
// when trans_a; B is stored (K,N), or (N,K) when trans_b. ld_*: elements between two rows as stored.
// A batch of `batch` such products lies `stride_*` elements apart.
struct RowMajorGemm {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

// The same product as cuBLASLt sees it: D^T (N,M) = op(B)^T . op(A)^T in column-major, where a
// row-major matrix is its own transpose in column-major. So the operands swap, each keeps its
// transpose flag, and m, n swap.
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool trans_first = false, trans_second = false;  // cuBLAS's TRANSA and TRANSB
  // The stored (column-major) shapes and leading dimensions of cuBLAS's A (our B), B (our A) and D.
  int64_t first_rows = 0, first_cols = 0, first_ld = 0;
  int64_t second_rows = 0, second_cols = 0, second_ld = 0;
  int64_t d_rows = 0, d_cols = 0, d_ld = 0;
  int batch = 1;
  int64_t stride_first = 0, stride_second = 0, stride_d = 0;
};

// Throws std::invalid_argument when a dimension is not positive, a leading dimension is shorter than
// its stored row, or batched strides overlap the matrices they separate.
ColumnMajorGemm to_column_major(const RowMajorGemm& g);

// Row-major helpers for the model's three kinds of linear-layer GEMMs (weights (C,OC) as on CPU).
// out (N,OC) = inp (N,C) . weight (C,OC)
RowMajorGemm linear_forward_gemm(int64_t N, int64_t C, int64_t OC);
// dinp (N,C) = dout (N,OC) . weight^T
RowMajorGemm linear_input_grad_gemm(int64_t N, int64_t C, int64_t OC);
// dweight (C,OC) += inp^T . dout
RowMajorGemm linear_weight_grad_gemm(int64_t N, int64_t C, int64_t OC);

}  // namespace paratwin::exec::cuda
