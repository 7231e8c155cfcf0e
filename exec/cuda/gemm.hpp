// bf16 GEMMs with fp32 accumulation through cuBLASLt: operands bf16, result bf16 or fp32 (weight
// gradients accumulate in fp32 with beta = 1), an optional bias added by cuBLASLt's epilogue. Shapes
// are given row-major (gemm_shape.hpp) and mapped to cuBLASLt's column-major here.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "exec/cuda/device_buffer.hpp"
#include "exec/cuda/gemm_shape.hpp"

namespace paratwin::exec::cuda {

enum class ResultType { Bf16, Float };
// The cost model's two GEMM classes (exec/gpt/kernel_clock.hpp): linear layers and the logits, and
// attention's per-head products. Profiles split a task's time by them.
enum class GemmClass { Dense, Attention };

// GPU time spent in GEMMs since the last collect(), by class, in seconds.
struct GemmGpuSeconds {
  double dense_s = 0, attention_s = 0;
};

class Gemm {
 public:
  // Creates the cuBLASLt handle and a 32 MiB workspace on the current device.
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // D = alpha * op(A) . op(B) + beta * D (+ bias (N), a bf16 row vector added to every row of D).
  // Throws CudaError when cuBLASLt has no algorithm for the shapes, and std::invalid_argument for an
  // inconsistent description (to_column_major).
  void run(const RowMajorGemm& g, const __nv_bfloat16* A, const __nv_bfloat16* B, void* D, ResultType d_type,
           float alpha, float beta, const __nv_bfloat16* bias, cudaStream_t stream,
           GemmClass kind = GemmClass::Dense);

  // With timing on, every GEMM is bracketed by CUDA events; collect() sums their times once the
  // stream has passed them (call it after synchronizing) and starts over.
  void set_timing(bool on) { timing_ = on; }
  GemmGpuSeconds collect();

 private:
  // What the chosen algorithm depends on: shapes, types, epilogue and the pointers' alignments.
  using Key = std::tuple<std::vector<int64_t>, int, bool>;
  cublasLtMatmulAlgo_t algorithm(const Key& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                 cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d,
                                 const std::vector<int>& align);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
  std::map<Key, cublasLtMatmulAlgo_t> algorithms_;
  struct Timed {
    Event start{true}, stop{true};
    GemmClass kind = GemmClass::Dense;
  };
  bool timing_ = false;
  std::vector<std::unique_ptr<Timed>> timed_;
  size_t used_ = 0;
};

}  // namespace paratwin::exec::cuda
