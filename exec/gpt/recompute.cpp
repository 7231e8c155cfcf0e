// Activation recomputation: what the forward of a layer dropped under the micro-batch's policy is
// computed again, by the same kernels on the same inputs, so the backward sees the same bits.
#include <stdexcept>
#include <string>

#include "exec/gpt/kernels.hpp"
#include "exec/gpt/model.hpp"

namespace paratwin::exec {

template <class T>
void Gpt<T>::recompute(Activations<T>& a, int layer) {
  const GptConfig& c = config_;
  if (layer < 0 || layer >= c.layers)
    throw std::invalid_argument("recompute of layer " + std::to_string(layer) + " of a model of " +
                                std::to_string(c.layers));
  switch (a.policy) {
    case ActivationPolicy::KeepAll:
      return;  // nothing was dropped
    case ActivationPolicy::RecomputeLayers:
      // The whole layer again from its kept input; its output (already in the next layer's input) is
      // written aside.
      forward_layer(a, layer, a.recomputed_out.data());
      return;
    case ActivationPolicy::RecomputeOps:
      throw std::logic_error("per-operator recomputation in the one-rank model");  // allocate() refuses it
    case ActivationPolicy::RecomputeSelective: {
      // The attention core only: softmax probabilities (one layer's buffer) from the kept q, k, v. The
      // core's output is written again over the kept one, with the same values.
      const int B = a.B, Tn = a.Tn, N = B * Tn;
      const size_t l = size_t(layer);
      kernels::attention_forward(a.attn_out.data() + l * N * c.attn_width(), a.att.data(),
                                 a.qkv.data() + l * N * c.qkv_width(), B, Tn, c.heads, c.kv_heads, c.head_dim,
                                 attention_mask(layer));
      a.recomputed_layer = layer;
      return;
    }
  }
}

template void Gpt<float>::recompute(Activations<float>&, int);
template void Gpt<double>::recompute(Activations<double>&, int);

}  // namespace paratwin::exec
