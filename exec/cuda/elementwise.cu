// Elementwise kernels and small reductions: precision conversions, residual adds, gradient scaling,
// the gradient norm's sum of squares, bias gradients.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

__global__ void convert_to_bf16_kernel(bf16* out, const float* in, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(in[i]);
}

__global__ void convert_to_float_kernel(float* out, const bf16* in, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

__global__ void add_inplace_kernel(bf16* out, const bf16* in, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(load(out, i) + load(in, i));
}

__global__ void scale_inplace_kernel(float* data, float factor, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

// Grid-stride: each block sums its share in fp32 per thread, then adds the block's total in double.
__global__ void sum_of_squares_kernel(double* result, const float* data, long long n) {
  __shared__ float shared[32];
  float v = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    v += data[i] * data[i];
  v = block_sum(v, shared);
  if (threadIdx.x == 0) atomicAdd(result, double(v));
}

__global__ void add_bias_kernel(bf16* out, const bf16* bias, long long N, int OC) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N * OC) out[i] = __float2bfloat16(load(out, i) + load(bias, i % OC));
}

// Block (32, kColumnBlockRows): column c = blockIdx.x * 32 + threadIdx.x, rows of chunk blockIdx.y.
__global__ void bias_grad_kernel(float* dbias, const bf16* dout, int N, int C, int ld) {
  __shared__ float partial[kColumnBlockRows][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int row_begin = blockIdx.y * kColumnChunkRows;
  const int row_end = min(N, row_begin + kColumnChunkRows);
  float sum = 0;
  if (c < C)
    for (int r = row_begin + threadIdx.y; r < row_end; r += kColumnBlockRows)
      sum += load(dout, (long long)r * ld + c);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int y = 1; y < kColumnBlockRows; ++y) sum += partial[y][threadIdx.x];
    atomicAdd(dbias + c, sum);
  }
}

}  // namespace

void convert_to_bf16(bf16* out, const float* in, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  convert_to_bf16_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, in, n);
  PARATWIN_CUDA_CHECK_LAUNCH("convert_to_bf16_kernel");
}

void convert_to_float(float* out, const bf16* in, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  convert_to_float_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, in, n);
  PARATWIN_CUDA_CHECK_LAUNCH("convert_to_float_kernel");
}

void add_inplace(bf16* out, const bf16* in, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  add_inplace_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, in, n);
  PARATWIN_CUDA_CHECK_LAUNCH("add_inplace_kernel");
}

void scale_inplace(float* data, float factor, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const LaunchShape s = elementwise_launch(n);
  scale_inplace_kernel<<<grid_of(s), block_of(s), 0, stream>>>(data, factor, n);
  PARATWIN_CUDA_CHECK_LAUNCH("scale_inplace_kernel");
}

void sum_of_squares(double* result, const float* data, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  LaunchShape s = elementwise_launch(n);
  s.grid_x = s.grid_x < 1024u ? s.grid_x : 1024u;  // grid-stride: enough blocks to fill the GPU
  sum_of_squares_kernel<<<grid_of(s), block_of(s), 0, stream>>>(result, data, n);
  PARATWIN_CUDA_CHECK_LAUNCH("sum_of_squares_kernel");
}

void add_bias(bf16* out, const bf16* bias, int N, int OC, cudaStream_t stream) {
  if (N == 0 || OC == 0) return;
  const LaunchShape s = elementwise_launch(int64_t(N) * OC);
  add_bias_kernel<<<grid_of(s), block_of(s), 0, stream>>>(out, bias, N, OC);
  PARATWIN_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

void bias_grad(float* dbias, const bf16* dout, int N, int C, int ld, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const LaunchShape s = column_reduce_launch(N, C);
  bias_grad_kernel<<<grid_of(s), block_of(s), 0, stream>>>(dbias, dout, N, C, ld);
  PARATWIN_CUDA_CHECK_LAUNCH("bias_grad_kernel");
}

}  // namespace paratwin::exec::cuda
