// GPT-2's initialization, counter-based: every weight is a function of the seed and of its index in
// the whole model's flat layout (parameter_layout), not of the weights drawn before it. So a shard
// initializes its own part without the whole model, the rank's threads fill pieces in any order, and
// every layout (tp, pp, cp, ep, any number of threads) starts from the same weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace paratwin::exec {

// How a tensor starts: biases 0, norm weights 1, the rest normal(0, std) with GPT-2's std (0.02,
// residual projections 0.02 / sqrt(2 x layers), learned positions 0.01).
struct InitialDistribution {
  enum class Kind { Zero, One, Normal } kind = Kind::Normal;
  float std = 0.02f;
};
// By the tensor's name in parameter_layout ("layer3.attn_proj_w", "wte", ...).
InitialDistribution initial_distribution(const std::string& tensor, int layers);

// out[i] = the initial value of the weight at flat index first + i of the whole model (count values),
// drawn from `d`. Runs on the calling thread.
template <class T>
void initial_weights(T* out, uint64_t seed, size_t first, size_t count, InitialDistribution d);

}  // namespace paratwin::exec
