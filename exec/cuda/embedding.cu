// Token and learned position embeddings: a gather forward, a scatter-add backward.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

// One thread per (token, c) of out (B,T,C).
__global__ void embedding_forward_kernel(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe,
                                         long long N, int Tn, int C) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  const long long n = i / C, c = i % C, t = n % Tn;
  const float e = load(wte, (long long)tokens[n] * C + c) + (wpe ? load(wpe, t * C + c) : 0.0f);
  out[i] = __float2bfloat16(e);
}

// One thread per (token, c): rows of dwte may repeat (the same token twice), hence atomic adds.
__global__ void embedding_backward_wte_kernel(float* dwte, const float* dout, const int32_t* tokens,
                                              long long N, int C) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  const long long n = i / C, c = i % C;
  atomicAdd(dwte + (long long)tokens[n] * C + c, dout[i]);
}

// One thread per (t, c) of dwpe: a sum over the batch, without atomics.
__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dout, int B, int Tn, int C) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)Tn * C) return;
  float sum = 0;
  for (int b = 0; b < B; ++b) sum += dout[(long long)b * Tn * C + i];
  dwpe[i] += sum;
}

}  // namespace

void embedding_forward(bf16* out, const int32_t* tokens, const bf16* wte, const bf16* wpe, int B, int Tn,
                       int C, cudaStream_t stream) {
  const int64_t N = int64_t(B) * Tn;
  if (N == 0) return;
  const LaunchShape s = elementwise_launch(N * C);
  embedding_forward_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, tokens, wte, wpe, N, Tn, C);
  PARATWIN_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int Tn,
                        int C, cudaStream_t stream) {
  const int64_t N = int64_t(B) * Tn;
  if (N == 0) return;
  const LaunchShape s = elementwise_launch(N * C);
  embedding_backward_wte_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dwte, dout, tokens, N, C);
  PARATWIN_CUDA_CHECK_LAUNCH("embedding_backward_wte_kernel");
  if (dwpe) {
    const LaunchShape p = elementwise_launch(int64_t(Tn) * C);
    embedding_backward_wpe_kernel<<<grid_of(p), block_of(p), 0, stream>>>(dwpe, dout, B, Tn, C);
    PARATWIN_CUDA_CHECK_LAUNCH("embedding_backward_wpe_kernel");
  }
}

}  // namespace paratwin::exec::cuda
