// The MLP's pointwise activations: GELU (GPT-2's tanh approximation) and SwiGLU, as exec/gpt/mlp.cpp.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = load(inp, i);
  out[i] = __float2bfloat16(0.5f * x * (1.0f + tanhf(kGeluScale * (x + 0.044715f * x * x * x))));
}

__global__ void gelu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = load(inp, i);
  const float th = tanhf(kGeluScale * (x + 0.044715f * x * x * x));
  const float grad =
      0.5f * (1.0f + th) + x * 0.5f * (1.0f - th * th) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  dinp[i] = __float2bfloat16(load(dout, i) * grad);
}

// One thread per (row, f) of the output (N,F); inp rows are 2F wide.
__global__ void swiglu_forward_kernel(bf16* out, const bf16* inp, long long N, int F) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * F) return;
  const long long row = i / F, f = i % F;
  const float g = load(inp, row * 2 * F + f), u = load(inp, row * 2 * F + F + f);
  out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
}

__global__ void swiglu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, long long N, int F) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * F) return;
  const long long row = i / F, f = i % F;
  const float g = load(inp, row * 2 * F + f), u = load(inp, row * 2 * F + F + f), dy = load(dout, i);
  const float sig = 1.0f / (1.0f + expf(-g));
  dinp[row * 2 * F + f] = __float2bfloat16(dy * u * sig * (1.0f + g * (1.0f - sig)));
  dinp[row * 2 * F + F + f] = __float2bfloat16(dy * g * sig);
}

}  // namespace

void gelu_forward(bf16* out, const bf16* inp, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  gelu_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, inp, n);
  PARATWIN_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  gelu_backward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dinp, inp, dout, n);
  PARATWIN_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

void swiglu_forward(bf16* out, const bf16* inp, int N, int F, cudaStream_t stream) {
  if (N == 0 || F == 0) return;
  const LaunchShape s = elementwise_launch(int64_t(N) * F);
  swiglu_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, inp, N, F);
  PARATWIN_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F, cudaStream_t stream) {
  if (N == 0 || F == 0) return;
  const LaunchShape s = elementwise_launch(int64_t(N) * F);
  swiglu_backward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dinp, inp, dout, N, F);
  PARATWIN_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace paratwin::exec::cuda
