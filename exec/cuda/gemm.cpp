// cuBLASLt matmuls: descriptors built per call (host-only work), the heuristic's algorithm cached
// per shape and alignment.
#include "exec/cuda/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "exec/cuda/check.hpp"

namespace paratwin::exec::cuda {

namespace {

// The largest power of two (up to 256) that divides the address, and also every row's and every
// batch entry's start (ld and stride in bytes): the alignment cuBLASLt may assume for the operand.
int alignment_of(const void* p, int64_t ld_bytes, int64_t stride_bytes) {
  const auto bits = reinterpret_cast<uintptr_t>(p) | uintptr_t(ld_bytes) | uintptr_t(stride_bytes);
  int a = 256;
  while (a > 1 && bits % uintptr_t(a) != 0) a /= 2;
  return a;
}

struct OpDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~OpDesc() {
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() {
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  }
};
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

void make_layout(Layout& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int batch,
                 int64_t stride) {
  PARATWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.layout, type, uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    const int32_t count = batch;
    PARATWIN_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    PARATWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
}

}  // namespace

Gemm::Gemm() {
  PARATWIN_CUBLAS_CHECK(cublasLtCreate(&handle_));
  PARATWIN_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

cublasLtMatmulAlgo_t Gemm::algorithm(const Key& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                                     const std::vector<int>& align) {
  auto it = algorithms_.find(key);
  if (it != algorithms_.end()) return it->second;
  Preference pref;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.pref));
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof workspace_bytes_));
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    const uint32_t bytes = uint32_t(align[std::min(i, 2)]);  // C is D
    PARATWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.pref, which[i], &bytes, sizeof bytes));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  PARATWIN_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, d, d, pref.pref, 1, &result, &found));
  if (found == 0)
    throw_cublas_error(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  algorithms_.emplace(key, result.algo);
  return result.algo;
}

void Gemm::run(const RowMajorGemm& g, const __nv_bfloat16* A, const __nv_bfloat16* B, void* D,
               ResultType d_type, float alpha, float beta, const __nv_bfloat16* bias, cudaStream_t stream,
               GemmClass kind) {
  const ColumnMajorGemm c = to_column_major(g);
  if (bias && c.batch > 1)
    throw std::invalid_argument("GEMM: a bias epilogue on a batched GEMM is not supported");
  OpDesc op;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_16BF;
    PARATWIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    PARATWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                         &bias_type, sizeof bias_type));
    PARATWIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const cudaDataType_t dt = d_type == ResultType::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // cuBLAS's A is our B and the other way round (see gemm_shape.hpp).
  Layout a, b, d;
  make_layout(a, CUDA_R_16BF, c.first_rows, c.first_cols, c.first_ld, c.batch, c.stride_first);
  make_layout(b, CUDA_R_16BF, c.second_rows, c.second_cols, c.second_ld, c.batch, c.stride_second);
  make_layout(d, dt, c.d_rows, c.d_cols, c.d_ld, c.batch, c.stride_d);
  const int64_t d_bytes = d_type == ResultType::Bf16 ? 2 : 4, batched = c.batch > 1 ? 1 : 0;
  const std::vector<int> align = {
      alignment_of(B, c.first_ld * 2, batched * c.stride_first * 2),
      alignment_of(A, c.second_ld * 2, batched * c.stride_second * 2),
      alignment_of(D, c.d_ld * d_bytes, batched * c.stride_d * d_bytes),
  };
  const Key key{
      {c.m, c.n, c.k, c.first_ld, c.second_ld, c.d_ld, c.batch, c.stride_first, c.stride_second, c.stride_d,
       c.trans_first, c.trans_second, int(dt), align[0], align[1], align[2], beta != 0.0f ? 1 : 0},
      int(d_type),
      bias != nullptr};
  const cublasLtMatmulAlgo_t algo = algorithm(key, op.desc, a.layout, b.layout, d.layout, align);
  Timed* timed = nullptr;
  if (timing_) {
    if (used_ == timed_.size()) timed_.push_back(std::make_unique<Timed>());
    timed = timed_[used_++].get();
    timed->kind = kind;
    timed->start.record(stream);
  }
  PARATWIN_CUBLAS_CHECK(cublasLtMatmul(handle_, op.desc, &alpha, B, a.layout, A, b.layout, &beta, D, d.layout,
                                       D, d.layout, &algo, workspace_, workspace_bytes_, stream));
  if (timed) timed->stop.record(stream);
}

GemmGpuSeconds Gemm::collect() {
  GemmGpuSeconds out;
  for (size_t i = 0; i < used_; ++i) {
    const double s = double(timed_[i]->stop.elapsed_ms_since(timed_[i]->start)) * 1e-3;
    (timed_[i]->kind == GemmClass::Attention ? out.attention_s : out.dense_s) += s;
  }
  used_ = 0;
  return out;
}

}  // namespace paratwin::exec::cuda
