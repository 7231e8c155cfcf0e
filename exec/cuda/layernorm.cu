// LayerNorm (GPT) and RMSNorm (Llama) forward and backward: one warp per row (token) for the row
// statistics and the input gradient, a column reduction for the weight and bias gradients.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

constexpr float kEpsilon = 1e-5f;  // as exec/gpt/layernorm.cpp

// inp, out (N,C); mean, rstd (N); weight, bias (C). A warp per row; mean == nullptr: RMSNorm.
__global__ void norm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                                    const bf16* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;  // the whole warp leaves together
  const bf16* x = inp + (long long)row * C;
  bf16* y = out + (long long)row * C;
  float m = 0;
  if (mean) {
    float sum = 0;
    for (int c = lane; c < C; c += kWarp) sum += load(x, c);
    m = warp_sum(sum) / C;
  }
  float var = 0;  // variance (LayerNorm) or mean square (RMSNorm)
  for (int c = lane; c < C; c += kWarp) {
    const float d = load(x, c) - m;
    var += d * d;
  }
  const float s = rsqrtf(warp_sum(var) / C + kEpsilon);
  for (int c = lane; c < C; c += kWarp)
    y[c] = __float2bfloat16((load(x, c) - m) * s * load(weight, c) + (bias ? load(bias, c) : 0.0f));
  if (lane == 0) {
    if (mean) mean[row] = m;
    rstd[row] = s;
  }
}

// The input gradient, a warp per row: dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),
// dnorm = weight * dy; the mean(dnorm) term only for LayerNorm. Added into the fp32 residual gradient.
__global__ void norm_backward_input_kernel(float* dres, bf16* dres_bf16, const bf16* dout, const bf16* inp,
                                           const bf16* weight, const float* mean, const float* rstd, int N,
                                           int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const long long base = (long long)row * C;
  const float m = mean ? mean[row] : 0.0f, s = rstd[row];
  float dnorm_sum = 0, dnorm_norm_sum = 0;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (load(inp, base + c) - m) * s, dnorm = load(weight, c) * load(dout, base + c);
    dnorm_sum += dnorm;
    dnorm_norm_sum += dnorm * norm;
  }
  const float dnorm_mean = mean ? warp_sum(dnorm_sum) / C : 0.0f;
  const float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / C;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (load(inp, base + c) - m) * s, dnorm = load(weight, c) * load(dout, base + c);
    const float total = dres[base + c] + s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    dres[base + c] = total;
    dres_bf16[base + c] = __float2bfloat16(total);
  }
}

// dweight (C) += sum over rows of norm * dy, dbias (C) += sum of dy. Block (32, kColumnBlockRows).
__global__ void norm_backward_weight_kernel(float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                            const float* mean, const float* rstd, int N, int C) {
  __shared__ float partial_w[kColumnBlockRows][kWarp + 1];
  __shared__ float partial_b[kColumnBlockRows][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int row_begin = blockIdx.y * kColumnChunkRows;
  const int row_end = min(N, row_begin + kColumnChunkRows);
  float sw = 0, sb = 0;
  if (c < C)
    for (int r = row_begin + threadIdx.y; r < row_end; r += kColumnBlockRows) {
      const long long i = (long long)r * C + c;
      const float dy = load(dout, i), norm = (load(inp, i) - (mean ? mean[r] : 0.0f)) * rstd[r];
      sw += norm * dy;
      sb += dy;
    }
  partial_w[threadIdx.y][threadIdx.x] = sw;
  partial_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int y = 1; y < kColumnBlockRows; ++y) {
      sw += partial_w[y][threadIdx.x];
      sb += partial_b[y][threadIdx.x];
    }
    atomicAdd(dweight + c, sw);
    if (dbias) atomicAdd(dbias + c, sb);
  }
}

}  // namespace

void norm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                  int N, int C, cudaStream_t stream) {
  if (N == 0) return;
  const LaunchShape s = row_warp_launch(N);
  norm_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, mean, rstd, inp, weight, bias, N, C);
  PARATWIN_CUDA_CHECK_LAUNCH("norm_forward_kernel");
}

void norm_backward(float* dres, bf16* dres_bf16, float* dweight, float* dbias, const bf16* dout,
                   const bf16* inp, const bf16* weight, const float* mean, const float* rstd, int N, int C,
                   cudaStream_t stream) {
  if (N == 0) return;
  const LaunchShape rows = row_warp_launch(N);
  norm_backward_input_kernel<<<grid_of(rows), block_of(rows), 0, stream>>>(dres, dres_bf16, dout, inp, weight,
                                                                           mean, rstd, N, C);
  PARATWIN_CUDA_CHECK_LAUNCH("norm_backward_input_kernel");
  const LaunchShape cols = column_reduce_launch(N, C);
  norm_backward_weight_kernel<<<grid_of(cols), block_of(cols), 0, stream>>>(dweight, dbias, dout, inp, mean,
                                                                            rstd, N, C);
  PARATWIN_CUDA_CHECK_LAUNCH("norm_backward_weight_kernel");
}

}  // namespace paratwin::exec::cuda
