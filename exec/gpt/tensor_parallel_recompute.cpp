// Activation recomputation on a rank's shard: what the forward of a layer dropped under its policy,
// computed again from what it kept (see ShardedGpt::recompute).
#include <stdexcept>
#include <string>

#include "exec/gpt/context_parallel.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/gpt/tensor_parallel.hpp"

namespace paratwin::exec {

void ShardedGpt::recompute(ChunkActivations& a, int layer) {
  const auto [lo, hi] = spec_.chunks.at(a.chunk);
  if (layer < lo || layer >= hi)
    throw std::invalid_argument("recompute of layer " + std::to_string(layer) + " outside the chunk's [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + ")");
  const int li = layer - lo;
  switch (a.policy(li)) {
    case ActivationPolicy::KeepAll:
      return;  // nothing was dropped
    case ActivationPolicy::RecomputeLayers:
      forward_layers(a, layer, layer + 1, true);  // from its kept input, its TP collectives included
      break;
    case ActivationPolicy::RecomputeAttention: {
      // The attention core: this rank's heads' probabilities from the kept (rotated) q, k, v; its
      // output is written again over the kept one, with the same values. Under CP the keys and values
      // are the whole sequence's, kept as the forward gathered them.
      const int N = a.B * a.Tn, D = full_.head_dim;
      const size_t s = a.kept(li);
      float* out = a.attn_out.data() + s * N * Hl_ * D;
      const float* qkv = a.qkv.data() + s * N * (Hl_ + 2 * Kl_) * D;
      float* att = a.att.data() + a.att_kept(li) * a.B * Hl_ * a.Tn * keys(a.Tn);
      if (cp_)
        cp_->attend(out, att, a.kv.data() + s * a.B * keys(a.Tn) * 2 * Kl_ * D, qkv, a.B, Hl_, Kl_, D,
                    attention_mask(layer));
      else
        kernels::attention_forward(out, att, qkv, a.B, a.Tn, Hl_, Kl_, D, attention_mask(layer));
      break;
    }
  }
  a.recomputed_layer = layer;
}

}  // namespace paratwin::exec
