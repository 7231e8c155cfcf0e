// The GPT the live backend trains: a decoder-only transformer over flat parameter and gradient
// buffers, whose backward can run in layer ranges (the Program cuts the last micro-batch's backward
// where DP buckets end, so each bucket's all-reduce starts while earlier layers are still running).
#pragma once

#include <cstdint>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/config.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/gpt/moe.hpp"
#include "exec/tensor.hpp"

namespace paratwin::exec {

// What the forward keeps for the backward (Korthikanti et al. 2022): everything; everything but the
// modules selective recomputation lists (the attention core's softmax by default, recomputed per layer
// in the backward; ShardedGpt also an MoE layer's pre-MLP norm and experts' activation, Megatron-Core's
// recompute_modules layernorm and moe_act); the layer's input and
// the outputs of its first and third linears, QKV and the MLP's first (per-operator checkpointing,
// torchtitan's "op": plan/cost/op_checkpoint.hpp, ShardedGpt only); or only each layer's input (the whole
// layer recomputed in the backward: "full").
enum class ActivationPolicy { KeepAll, RecomputeSelective, RecomputeOps, RecomputeLayers };

// Everything the forward of one micro-batch keeps for its backward. N = B x T tokens. Under a
// recompute policy the buffers marked (L,...) that are not kept hold one layer (the one recomputed).
template <class T>
struct Activations {
  int B = 0, Tn = 0;
  ActivationPolicy policy = ActivationPolicy::KeepAll;
  int recomputed_layer = -1;             // whose dropped activations the one-layer buffers hold now
  std::vector<int32_t> tokens, targets;  // (B,T)
  Buffer<T> residual;                    // (L+1,N,C): the input of each layer, then the last one's output
  Buffer<T> mid;                         // (L,N,C): the residual stream after attention
  Buffer<T> ln1, ln1_mean, ln1_rstd;     // (L,N,C), (L,N), (L,N)
  Buffer<T> qkv;                         // (L,N,(H+2K)D), after rotary positions
  Buffer<T> att;                         // (L,B,H,T,T) softmax probabilities
  Buffer<T> attn_out;                    // (L,N,H*D)
  Buffer<T> ln2, ln2_mean, ln2_rstd;     // (L,N,C), (L,N), (L,N)
  Buffer<T> fc, fc_act;                  // (L,N,fc_width), (L,N,F)
  Buffer<T> lnf, lnf_mean, lnf_rstd;     // (N,C), (N), (N)
  Buffer<T> probs;                       // (N,V)
  Buffer<T> losses;                      // (N)
  Buffer<T> dresidual;                   // (N,C): the gradient between two backward segments
  Buffer<T> recomputed_out;              // (N,C) under RecomputeLayers: a recomputed layer's output
  std::vector<MoeActivations<T>> moe;    // (L): MoE layers' routing and experts (empty for dense ones)
  double loss = 0;                       // mean over the N tokens
};

template <class T>
class Gpt {
 public:
  explicit Gpt(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  Buffer<T>& parameters() { return params_; }
  const Buffer<T>& parameters() const { return params_; }
  Buffer<T>& gradients() { return grads_; }

  // GPT-2's initialization from a seed: normal(0, 0.02) weights, residual projections scaled by
  // 1/sqrt(2L), norm weights 1, biases 0; counter-based (init.hpp), so every shard of the model draws
  // the same values for its part.
  void initialize(uint64_t seed);
  void zero_gradients();

  // Sizes `acts` for B sequences of Tn tokens. Throws std::invalid_argument when Tn exceeds the
  // model's sequence length.
  void allocate(Activations<T>& acts, int B, int Tn,
                ActivationPolicy policy = ActivationPolicy::KeepAll) const;
  // Runs the forward of acts.tokens against acts.targets; returns (and stores) the mean loss.
  double forward(Activations<T>& acts);
  // Backward of layers [lo, hi), from the top down: the head and loss first when hi = layers, the
  // embeddings last when lo = 0. Segments must come in order from the top. Gradients are added to
  // gradients(); `loss_scale` multiplies the loss's gradient (1 / micro-batches for accumulation).
  void backward(Activations<T>& acts, int lo, int hi, T loss_scale);
  // Recomputes what the forward of `layer` dropped under acts.policy (recompute.cpp), bit for bit as
  // the forward computed it; the backward calls it for each layer it reaches that needs it.
  void recompute(Activations<T>& acts, int layer);

 private:
  const T* p(size_t offset) const;
  T* g(size_t offset);
  const T* head() const;
  T* dhead();
  void ensure_scratch(long N);
  // One transformer layer's forward from acts.residual[layer], its output written to `out` (N,C).
  void forward_layer(Activations<T>& acts, int layer, T* out);
  // A MoE layer's MLP (moe_layer.cpp): out (N,C) = the gated sum of each token's experts on ln2 (N,C);
  // the backward adds d ln2 into dln2 (N,C) from dout (N,C).
  void moe_forward(Activations<T>& acts, int layer, const T* ln2, T* out);
  void moe_backward(Activations<T>& acts, int layer, const T* dout, const T* ln2, T* dln2);
  MoeWeights<T> moe_weights(int layer);  // the router and this rank's experts
  MoeShape moe_shape(const Activations<T>& acts) const;

  GptConfig config_;
  ParameterLayout layout_;
  std::vector<LayerOffsets> layers_;
  size_t wte_, wpe_, lnf_w_, lnf_b_, head_;
  Buffer<T> params_, grads_;
  Buffer<T> dln_, dqkv_, dattn_, dfc_, dact_, dlogits_;  // backward scratch, sized for the largest N
  ExpertGroup experts_;        // every expert on this rank (expert parallelism runs on ShardedGpt)
  std::vector<double> alibi_;  // ALiBi's slope of each head (empty without ALiBi)
  kernels::RotaryAngles rotary_;
  kernels::AttentionMask attention_mask(int layer) const {
    return {alibi_.empty() ? nullptr : alibi_.data(), config_.window(layer)};
  }
};

extern template class Gpt<float>;
extern template class Gpt<double>;

}  // namespace paratwin::exec
