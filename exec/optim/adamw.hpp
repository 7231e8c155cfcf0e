// AdamW (Loshchilov and Hutter 2019): Adam with weight decay applied to the weights directly, not
// through the gradient. Decay applies to matrices only; biases and norm weights are not decayed.
// Under ZeRO the optimizer of a rank holds the moments of the parameters it owns only. One step is one
// fused pass over the parameters (gradient scale, moments, decay, update) on the rank's threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "exec/tensor.hpp"

namespace paratwin::exec {

struct AdamWSettings {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float epsilon = 1e-8f;
  float weight_decay = 0.1f;
};

using ParameterRanges = std::vector<std::pair<size_t, size_t>>;  // [begin, end) of the flat parameters

// The ranges where `flags` is true, ascending (a per-parameter mask as ranges).
ParameterRanges ranges_of(const std::vector<bool>& flags);

class AdamW {
 public:
  // `parameters`: how many the model has; `decayed`: the ranges of those that are decayed, ascending
  // and disjoint. `owned`: the ranges of parameters this optimizer updates and keeps moments for,
  // ascending and disjoint (empty: all of them).
  AdamW(AdamWSettings settings, size_t parameters, ParameterRanges decayed, ParameterRanges owned = {});

  // One step on parameters [begin, end), which must lie in one owned range, with learning rate `lr`;
  // `params` and `grads` point at parameter `begin`, and each gradient counts multiplied by
  // `grad_scale` (the mean over replicas times the clipping factor; grads are not written). `step`
  // counts from 1 (bias correction). Throws std::invalid_argument for a range it does not own.
  void update(float* params, const float* grads, size_t begin, size_t end, float lr, int64_t step,
              float grad_scale = 1.0f);

  const ParameterRanges& owned() const { return owned_; }
  // The moments of the owned ranges, one after the other.
  Buffer<float>& m() { return m_; }
  Buffer<float>& v() { return v_; }

  // The moments as a checkpoint keeps them: over all parameters, zero where not owned.
  std::vector<float> full_m() const;
  std::vector<float> full_v() const;
  // Takes the owned ranges' moments from whole-model ones (a checkpoint's).
  void assign_full(const std::vector<float>& m, const std::vector<float>& v);

 private:
  size_t state_index(size_t begin, size_t end) const;
  std::vector<float> full(const Buffer<float>& compact) const;

  AdamWSettings s_;
  size_t parameters_;
  ParameterRanges decayed_;
  ParameterRanges owned_;
  Buffer<float> m_, v_;
};

}  // namespace paratwin::exec
