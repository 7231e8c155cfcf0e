// Top-k gradient selection with error feedback by radix select: the k-th largest |grad + error| is
// found in four histogram passes over its 32-bit key (8 bits each, picked on the host by
// pick_radix_bin), then one pass keeps everything above it and as many ties as still needed.
#include <array>
#include <stdexcept>
#include <string>

#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

__device__ __forceinline__ unsigned key_of(float x) {
  return __float_as_uint(fabsf(x));
}

__global__ void accumulate_kernel(float* acc, const float* grads, const float* error, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = grads[i] + error[i];
}

// Counts the keys that match `prefix` on the bits of `mask`, by their byte at `shift`.
__global__ void histogram_kernel(unsigned long long* histogram, const float* acc, long long n,
                                 unsigned prefix, unsigned mask, int shift) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const unsigned key = key_of(acc[i]);
    if ((key & mask) == prefix) atomicAdd(&local[(key >> shift) & 255u], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (local[b]) atomicAdd(histogram + b, (unsigned long long)local[b]);
}

// Keeps keys above `threshold` (slots [0, above)) and the first `ties` keys equal to it (slots
// [above, above + ties)); the error keeps what was not sent.
__global__ void select_kernel(float* values, int32_t* indices, float* error, const float* acc, long long n,
                              unsigned threshold, unsigned long long above, unsigned long long ties,
                              unsigned long long* counters) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = acc[i];
  const unsigned key = key_of(a);
  long long slot = -1;
  if (key > threshold) {
    slot = (long long)atomicAdd(&counters[0], 1ull);
  } else if (key == threshold) {
    const unsigned long long t = atomicAdd(&counters[1], 1ull);
    if (t < ties) slot = (long long)(above + t);
  }
  if (slot >= 0) {
    values[slot] = a;
    indices[slot] = (int32_t)i;
    error[i] = 0.0f;
  } else {
    error[i] = a;
  }
}

}  // namespace

TopK::TopK(int64_t capacity) : capacity_(capacity) {
  PARATWIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&acc_), size_t(capacity) * sizeof(float)));
  PARATWIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&histogram_), 256 * sizeof(unsigned long long)));
  PARATWIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counters_), 2 * sizeof(unsigned long long)));
}

TopK::~TopK() {
  cudaFree(acc_);
  cudaFree(histogram_);
  cudaFree(counters_);
}

void TopK::select(float* values, int32_t* indices, float* error, const float* grads, int64_t n, int64_t k,
                  cudaStream_t stream) {
  if (n > capacity_ || n > int64_t(INT32_MAX) || k <= 0 || k > n)
    throw std::invalid_argument("top-k: k " + std::to_string(k) + " of " + std::to_string(n) +
                                " values (capacity " + std::to_string(capacity_) + ")");
  const LaunchShape s = elementwise_launch(n);
  accumulate_kernel<<<grid_of(s), block_of(s), 0, stream>>>(acc_, grads, error, n);
  PARATWIN_CUDA_CHECK_LAUNCH("accumulate_kernel");
  unsigned prefix = 0, mask = 0;
  uint64_t above = 0, needed = uint64_t(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    PARATWIN_CUDA_CHECK(cudaMemsetAsync(histogram_, 0, 256 * sizeof(unsigned long long), stream));
    histogram_kernel<<<grid_of(s), block_of(s), 0, stream>>>(histogram_, acc_, n, prefix, mask, shift);
    PARATWIN_CUDA_CHECK_LAUNCH("histogram_kernel");
    std::array<unsigned long long, 256> counts{};
    PARATWIN_CUDA_CHECK(
        cudaMemcpyAsync(counts.data(), histogram_, sizeof counts, cudaMemcpyDeviceToHost, stream));
    PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::array<uint64_t, 256> histogram{};
    for (int b = 0; b < 256; ++b) histogram[b] = counts[b];
    const RadixPick pick = pick_radix_bin(histogram, needed);
    above += pick.above;
    needed = pick.still_needed;
    prefix |= unsigned(pick.bin) << shift;
    mask |= 255u << shift;
  }
  PARATWIN_CUDA_CHECK(cudaMemsetAsync(counters_, 0, 2 * sizeof(unsigned long long), stream));
  select_kernel<<<grid_of(s), block_of(s), 0, stream>>>(values, indices, error, acc_, n, prefix, above,
                                                        needed, counters_);
  PARATWIN_CUDA_CHECK_LAUNCH("select_kernel");
}

}  // namespace paratwin::exec::cuda
