// AdamW on the fp32 master weights, writing the bf16 copy the forward and backward read; the same
// arithmetic as exec/optim/adamw.cpp, one thread per parameter.
#include "exec/cuda/check.hpp"
#include "exec/cuda/device_math.cuh"
#include "exec/cuda/kernels.cuh"

namespace paratwin::exec::cuda {

namespace {

__global__ void adamw_kernel(float* master, bf16* params, float* m, float* v, const float* grads,
                             const uint8_t* decay, long long begin, long long end, AdamWStep s) {
  const long long i = begin + (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= end) return;
  const float g = grads[i] * s.grad_scale;
  const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float m_hat = mi / s.bias_correction1, v_hat = vi / s.bias_correction2;
  const float w = master[i];
  const float updated =
      w - s.lr * (m_hat / (sqrtf(v_hat) + s.epsilon) + (decay[i] ? s.weight_decay * w : 0.0f));
  master[i] = updated;
  params[i] = __float2bfloat16(updated);
}

}  // namespace

void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, const uint8_t* decay,
                  int64_t begin, int64_t end, const AdamWStep& s, cudaStream_t stream) {
  if (end <= begin) return;
  const LaunchShape l = elementwise_launch(end - begin);
  adamw_kernel<<<grid_of(l), block_of(l), 0, stream>>>(master, params, m, v, grads, decay, begin, end, s);
  PARATWIN_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace paratwin::exec::cuda
