// Softmax cross-entropy over the vocabulary: a block per token row. The forward keeps each row's
// log-sum-exp; the backward turns the logits into their gradient in place, as llm.c's fused classifier.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

__global__ void cross_entropy_forward_kernel(float* losses, float* lse, const bf16* logits,
                                             const int32_t* targets, int V, int ld) {
  __shared__ float shared[32];
  const long long row = blockIdx.x;
  const bf16* z = logits + row * ld;
  float max = -FLT_MAX;
  for (int v = threadIdx.x; v < V; v += blockDim.x) max = fmaxf(max, load(z, v));
  max = block_max(max, shared);
  float sum = 0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) sum += expf(load(z, v) - max);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const float log_sum_exp = max + logf(sum);
    lse[row] = log_sum_exp;
    losses[row] = log_sum_exp - load(z, targets[row]);
  }
}

__global__ void cross_entropy_backward_kernel(bf16* logits, const float* lse, const int32_t* targets, int V,
                                              int ld, float scale) {
  const long long row = blockIdx.x;
  bf16* z = logits + row * ld;
  const float l = lse[row];
  const int target = targets[row];
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    const float p = expf(load(z, v) - l);
    z[v] = __float2bfloat16((p - (v == target ? 1.0f : 0.0f)) * scale);
  }
}

}  // namespace

void cross_entropy_forward(float* losses, float* lse, const bf16* logits, const int32_t* targets, int N,
                           int V, int ld, cudaStream_t stream) {
  if (N == 0) return;
  const LaunchShape s = row_block_launch(N);
  cross_entropy_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(losses, lse, logits, targets, V, ld);
  PARATWIN_CUDA_CHECK_LAUNCH("cross_entropy_forward_kernel");
}

void cross_entropy_backward(bf16* logits, const float* lse, const int32_t* targets, int N, int V, int ld,
                            float scale, cudaStream_t stream) {
  if (N == 0) return;
  const LaunchShape s = row_block_launch(N);
  cross_entropy_backward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(logits, lse, targets, V, ld, scale);
  PARATWIN_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
}

}  // namespace paratwin::exec::cuda
