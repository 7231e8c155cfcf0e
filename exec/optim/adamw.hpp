// AdamW (Loshchilov and Hutter 2019): Adam with weight decay applied to the weights directly, not
// through the gradient. Decay applies to matrices only; biases and norm weights are not decayed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exec/tensor.hpp"

namespace paratwin::exec {

struct AdamWSettings {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float epsilon = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  // `decay[i]`: whether parameter i is decayed.
  AdamW(AdamWSettings settings, std::vector<bool> decay);

  // One step on parameters [begin, end) with learning rate `lr`; gradients are read as given.
  // `step` counts from 1 (bias correction).
  void update(float* params, const float* grads, size_t begin, size_t end, float lr, int64_t step);

  // The state a checkpoint keeps: first and second moments.
  Buffer<float>& m() { return m_; }
  Buffer<float>& v() { return v_; }

 private:
  AdamWSettings s_;
  std::vector<bool> decay_;
  Buffer<float> m_, v_;
};

}  // namespace paratwin::exec
