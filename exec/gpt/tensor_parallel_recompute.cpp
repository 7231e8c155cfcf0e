// Activation recomputation on a rank's shard: what the forward of a layer dropped under its policy,
// computed again from what it kept (see ShardedGpt::recompute).
#include <stdexcept>
#include <string>

#include "exec/gpt/context_parallel.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/gpt/tensor_parallel.hpp"
#include "plan/cost/op_checkpoint.hpp"

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
    case ActivationPolicy::RecomputeSelective:
      // The modules the stage lists: the attention core (this rank's heads' probabilities from the kept
      // (rotated) q, k, v; its output written again over the kept one, with the same values), an MoE
      // layer's pre-MLP norm and its experts' activation.
      if (a.modules.core_attn) recompute_attention(a, layer);
      if (drops_moe_norm(a, li, layer)) norm2_forward(a, layer);
      if (drops_moe_act(a, li, layer)) moe_activation_forward(a.moe[a.kept(li)], moe_shape(a.B * a.Tn));
      break;
    case ActivationPolicy::RecomputeOps:
      recompute_ops(a, layer);
      break;
  }
  a.recomputed_layer = layer;
}

void ShardedGpt::recompute_attention(ChunkActivations& a, int layer) {
  // Under CP the keys and values are the whole sequence's, kept as the forward gathered them.
  const int li = layer - spec_.chunks.at(a.chunk).first;
  const int N = a.B * a.Tn, D = full_.head_dim;
  const size_t s = a.kept(li);
  float* out = a.attn_out.data() + a.inner(li) * N * Hl_ * D;
  const float* qkv = a.qkv.data() + s * N * (Hl_ + 2 * Kl_) * D;
  float* att = a.att.data() + a.att_kept(li) * a.B * Hl_ * a.Tn * keys(a.Tn);
  if (cp_)
    cp_->attend(out, att, a.kv.data() + s * a.B * keys(a.Tn) * 2 * Kl_ * D, qkv, a.B, Hl_, Kl_, D,
                attention_mask(layer));
  else
    kernels::attention_forward(out, att, qkv, a.B, a.Tn, Hl_, Kl_, D, attention_mask(layer));
}

bool ShardedGpt::drops_moe_norm(const ChunkActivations& a, int li, int layer) const {
  return a.policy(li) == ActivationPolicy::RecomputeSelective && a.modules.layernorm &&
         full_.moe_layer(layer);
}

bool ShardedGpt::drops_moe_act(const ChunkActivations& a, int li, int layer) const {
  return a.policy(li) == ActivationPolicy::RecomputeSelective && a.modules.moe_act && full_.moe_layer(layer);
}

void ShardedGpt::check_op_rule(bool swiglu) {
  using cost::LayerLinear;
  const std::vector<LayerLinear> linears =
      cost::layer_linears(swiglu ? MlpKind::SwiGlu : MlpKind::Gelu, Projections::Fused);
  const bool same = linears.size() == 4 && linears[0] == LayerLinear::Qkv &&
                    linears[1] == LayerLinear::Output && cost::op_keeps_output(0) &&
                    cost::op_recomputes(1, 4) && cost::op_keeps_output(2) && !cost::op_recomputes(3, 4);
  if (!same)
    throw std::logic_error(
        "per-operator recomputation: the engine no longer runs what op_checkpoint.hpp says");
}

// Per-operator recomputation (plan/cost/op_checkpoint.hpp over the fused linears: qkv and fc kept, the output
// projection run again, fc_proj's output read by no backward): the first norm (gathered again under
// SP), the attention core, without SP the output projection and its all-reduce into mid (under SP mid,
// a reduce-scatter's output, is kept), the second norm (gathered again) and the activation. The same
// kernels on the same inputs as the forward: the same bits.
void ShardedGpt::recompute_ops(ChunkActivations& a, int layer) {
  const GptConfig& c = full_;
  const Layer& w = layers_[layer];
  const int li = layer - spec_.chunks.at(a.chunk).first;
  const int N = a.B * a.Tn, C = c.hidden, HD = Hl_ * c.head_dim, FW = c.swiglu ? 2 * Fl_ : Fl_;
  const int n = stream_rows(N);
  const size_t nC = size_t(n) * C, si = a.inner(li);
  ensure_scratch(N);
  const float* x = a.residual.data() + size_t(li) * nC;
  norm1_forward(a, layer);
  recompute_attention(a, layer);
  float* mid = a.mid.data() + mid_slot(a, li) * nC;
  if (!sequence_parallel()) {
    kernels::linear_forward(tmp_.data(), a.attn_out.data() + si * N * HD, p(w.proj_w),
                            static_cast<const float*>(nullptr), N, HD, C);
    residual_add(mid, reduce(tmp_.data(), N), p(w.proj_b), x, n);
  }
  norm2_forward(a, layer);
  if (c.moe_layer(layer)) return;  // its routing and experts are kept (a.moe)
  float* act = a.fc_act.data() + si * N * Fl_;
  const float* fc = a.fc.data() + a.kept(li) * N * FW;
  kernels::mlp_activation_forward(act, fc, N, Fl_, c.swiglu);
}

}  // namespace paratwin::exec
