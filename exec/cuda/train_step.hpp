// AdamW on the GPU with fp32 master weights, and one plain training step (forward, backward, global
// gradient-norm clipping, AdamW) as the CPU trainer does it with one rank and one micro-batch: what
// the GPU tests compare against the CPU and what the benchmark times.
#pragma once

#include <cstdint>

#include "exec/cuda/gpt_model.hpp"
#include "exec/optim/adamw.hpp"

namespace paratwin::exec::cuda {

class CudaAdamW {
 public:
  // Decay as the CPU trainer: matrices (rows > 1) except wpe.
  CudaAdamW(AdamWSettings settings, const ParameterLayout& layout, cudaStream_t stream);
  // One step on parameters [begin, end) of `model` with gradients multiplied by grad_scale; `step`
  // counts from 1. Queued on the stream.
  void update(CudaGpt& model, size_t begin, size_t end, float lr, int64_t step, float grad_scale);
  // The moments, for checkpoints (host <-> device, synchronous).
  void load_state(const float* m, const float* v);
  void store_state(float* m, float* v) const;

 private:
  AdamWSettings s_;
  cudaStream_t stream_;
  DeviceBuffer<uint8_t> decay_;
  DeviceBuffer<float> m_, v_;
};

// Sum of squares of grads [begin, end), in double; synchronizes the stream to read it.
double gradient_sum_of_squares(const float* grads, size_t begin, size_t end, cudaStream_t stream);

// Zeroes the gradients, runs forward and backward of all layers on tokens/targets (B x T each, in
// `acts` as allocated), clips the global norm to max_grad_norm and steps AdamW with `lr` (`step` from
// 1). Returns the loss before the update.
double train_step(CudaGpt& model, CudaAdamW& adamw, CudaActivations& acts, const int32_t* tokens,
                  const int32_t* targets, float lr, int64_t step, float max_grad_norm);

}  // namespace paratwin::exec::cuda
