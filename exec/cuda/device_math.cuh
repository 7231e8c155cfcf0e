// Device helpers shared by the kernels: warp and block sums and maxima, bf16 loads as fp32, launch
// shapes as dim3.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>

#include "exec/cuda/launch_config.hpp"

namespace paratwin::exec::cuda {

inline dim3 grid_of(const LaunchShape& s) {
  return dim3(s.grid_x, s.grid_y);
}
inline dim3 block_of(const LaunchShape& s) {
  return dim3(s.block_x, s.block_y);
}

__device__ __forceinline__ float load(const __nv_bfloat16* p, long long i) {
  return __bfloat162float(p[i]);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread. `shared`
// holds 32 floats; the call synchronizes the block twice, so consecutive calls may reuse it.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // a previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : -FLT_MAX;
  return warp_max(v);
}

}  // namespace paratwin::exec::cuda
