// The GPT's forward and backward: the kernels of exec/gpt/ chained as llm.c's gpt2_forward and
// gpt2_backward do, readable top to bottom.
#include "exec/gpt/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "exec/gpt/gemm.hpp"
#include "exec/gpt/init.hpp"
#include "exec/gpt/kernel_clock.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/tensor.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec {

namespace k = kernels;

template <class T>
Gpt<T>::Gpt(const GptConfig& config) : config_(config), layout_(parameter_layout(config)) {
  TensorOffsets o = tensor_offsets(layout_, config_.layers);
  layers_ = std::move(o.layers);
  wte_ = o.wte;
  wpe_ = o.wpe;
  lnf_w_ = o.lnf_w;
  lnf_b_ = o.lnf_b;
  head_ = o.head;
  if (config_.alibi) alibi_ = k::alibi_slopes(config_.heads);
  rotary_ = k::rotary_angles(config_.head_dim, config_.yarn_factor, config_.yarn_context);
  {
    MemoryUseScope use(MemoryUse::Parameters);
    params_.assign(layout_.total, T(0));
  }
  MemoryUseScope use(MemoryUse::Gradients);
  grads_.assign(layout_.total, T(0));
}

template <class T>
const T* Gpt<T>::p(size_t offset) const {
  return offset == kNoTensor ? nullptr : params_.data() + offset;
}
template <class T>
T* Gpt<T>::g(size_t offset) {
  return offset == kNoTensor ? nullptr : grads_.data() + offset;
}
template <class T>
const T* Gpt<T>::head() const {
  return p(config_.tied ? wte_ : head_);
}
template <class T>
T* Gpt<T>::dhead() {
  return g(config_.tied ? wte_ : head_);
}

template <class T>
void Gpt<T>::initialize(uint64_t seed) {
  // Counter-based (init.hpp): the same weights as any shard of this model draws for its part.
  for (const auto& t : layout_.tensors) {
    const InitialDistribution d = initial_distribution(t.name, config_.layers);
    parallel_for(long(t.size()), 1L << 16, [&](long b, long e) {
      initial_weights(params_.data() + t.offset + b, seed, t.offset + size_t(b), size_t(e - b), d);
    });
  }
}

template <class T>
void Gpt<T>::zero_gradients() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
void Gpt<T>::allocate(Activations<T>& a, int B, int Tn, ActivationPolicy policy) const {
  if (Tn > config_.max_seq_len)
    throw std::invalid_argument("sequence length " + std::to_string(Tn) + " exceeds the model's " +
                                std::to_string(config_.max_seq_len));
  if (policy == ActivationPolicy::RecomputeOps)
    throw std::invalid_argument(
        "the one-rank model recomputes whole layers or the attention core; "
        "per-operator recomputation runs in ShardedGpt");
  const GptConfig& c = config_;
  const size_t N = static_cast<size_t>(B) * Tn, C = c.hidden;
  // Layers whose inner activations and attention scores are kept (one buffer when recomputed).
  const size_t L = policy == ActivationPolicy::RecomputeLayers ? 1 : c.layers;
  const size_t L_att = policy == ActivationPolicy::KeepAll ? c.layers : 1;
  a.B = B;
  a.Tn = Tn;
  a.policy = policy;
  a.recomputed_layer = -1;
  a.tokens.assign(N, 0);
  a.targets.assign(N, 0);
  assign_zeros(a.residual, (c.layers + 1) * N * C);
  assign_zeros(a.mid, L * N * C);
  assign_zeros(a.ln1, L * N * C);
  assign_zeros(a.ln1_mean, L * N);
  assign_zeros(a.ln1_rstd, L * N);
  assign_zeros(a.qkv, L * N * c.qkv_width());
  assign_zeros(a.att, L_att * B * c.heads * size_t(Tn) * Tn);
  assign_zeros(a.attn_out, L * N * c.attn_width());
  assign_zeros(a.ln2, L * N * C);
  assign_zeros(a.ln2_mean, L * N);
  assign_zeros(a.ln2_rstd, L * N);
  assign_zeros(a.fc, L * N * c.fc_width());
  assign_zeros(a.fc_act, L * N * c.ffn);
  assign_zeros(a.lnf, N * C);
  assign_zeros(a.lnf_mean, N);
  assign_zeros(a.lnf_rstd, N);
  assign_zeros(a.probs, N * c.vocab);
  assign_zeros(a.losses, N);
  assign_zeros(a.dresidual, N * C);
  assign_zeros(a.recomputed_out, policy == ActivationPolicy::RecomputeLayers ? N * C : 0);
  a.moe.assign(c.experts > 0 ? size_t(c.layers) : 0, {});  // sized by the routing, in the forward
}

template <class T>
double Gpt<T>::forward(Activations<T>& a) {
  const GptConfig& c = config_;
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, V = c.vocab;
  for (int i = 0; i < N; ++i)
    if (a.tokens[i] < 0 || a.tokens[i] >= V || a.targets[i] < 0 || a.targets[i] >= V)
      throw std::invalid_argument("token " + std::to_string(std::max(a.tokens[i], a.targets[i])) +
                                  " is outside the vocabulary of " + std::to_string(V));
  const bool ln = !c.rmsnorm;
  // residual[0] is (N,C): token embeddings plus learned positions
  k::embedding_forward(a.residual.data(), a.tokens.data(), p(wte_), c.learned_positions() ? p(wpe_) : nullptr,
                       B, Tn, C);
  for (int l = 0; l < c.layers; ++l) forward_layer(a, l, a.residual.data() + size_t(l + 1) * N * C);
  const T* top = a.residual.data() + size_t(c.layers) * N * C;
  k::norm_forward(a.lnf.data(), ln ? a.lnf_mean.data() : nullptr, a.lnf_rstd.data(), top, p(lnf_w_),
                  p(lnf_b_), N, C);
  // logits (N,V) = lnf (N,C) . head^T, head is (V,C); the softmax overwrites them in place
  {
    KernelTimer timer(kernel_seconds.dense_s);
    k::gemm(false, true, N, V, C, T(1), a.lnf.data(), C, head(), C, T(0), a.probs.data(), V);
  }
  a.loss = k::cross_entropy_forward(a.probs.data(), a.losses.data(), a.probs.data(), a.targets.data(), N, V);
  return a.loss;
}

template <class T>
void Gpt<T>::forward_layer(Activations<T>& a, int l, T* out) {
  const GptConfig& c = config_;
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, H = c.heads, K = c.kv_heads, D = c.head_dim;
  const int QKV = c.qkv_width(), HD = c.attn_width(), F = c.ffn, FW = c.fc_width();
  const bool ln = !c.rmsnorm;
  const LayerOffsets& w = layers_[l];
  // The slots of this layer's activations: its own when kept, the one shared buffer when recomputed.
  const size_t s = a.policy == ActivationPolicy::RecomputeLayers ? 0 : size_t(l);
  const size_t sa = a.policy == ActivationPolicy::KeepAll ? size_t(l) : 0;
  const size_t nc = s * N * C, n1 = s * N;
  T* x = a.residual.data() + size_t(l) * N * C;  // (N,C) the layer's input
  T* ln1 = a.ln1.data() + nc;
  T* qkv = a.qkv.data() + s * N * QKV;
  T* att = a.att.data() + sa * B * H * Tn * Tn;
  T* attn_out = a.attn_out.data() + s * N * HD;
  T* mid = a.mid.data() + nc;
  T* ln2 = a.ln2.data() + nc;
  T* fc = a.fc.data() + s * N * FW;
  T* act = a.fc_act.data() + s * N * F;
  // Full recomputation keeps one layer's MoE routing and expert rows too: the layer recomputed before
  // this one is done with them.
  if (a.policy == ActivationPolicy::RecomputeLayers && a.recomputed_layer >= 0 && a.recomputed_layer != l &&
      !a.moe.empty())
    a.moe[size_t(a.recomputed_layer)] = MoeActivations<T>{};

  k::norm_forward(ln1, ln ? a.ln1_mean.data() + n1 : nullptr, a.ln1_rstd.data() + n1, x, p(w.ln1_w),
                  p(w.ln1_b), N, C);
  k::linear_forward(qkv, ln1, p(w.qkv_w), p(w.qkv_b), N, C, QKV);
  if (c.rope) k::rope(qkv, B, Tn, H, K, D, false, nullptr, rotary_);
  k::attention_forward(attn_out, att, qkv, B, Tn, H, K, D, attention_mask(l));
  k::linear_forward(mid, attn_out, p(w.attn_proj_w), p(w.attn_proj_b), N, HD, C);
  for (size_t i = 0; i < size_t(N) * C; ++i) mid[i] += x[i];  // residual connection
  k::norm_forward(ln2, ln ? a.ln2_mean.data() + n1 : nullptr, a.ln2_rstd.data() + n1, mid, p(w.ln2_w),
                  p(w.ln2_b), N, C);
  if (c.moe_layer(l)) {
    moe_forward(a, l, ln2, out);
  } else {
    k::linear_forward(fc, ln2, p(w.fc_w), p(w.fc_b), N, C, FW);
    k::mlp_activation_forward(act, fc, N, F, c.swiglu);
    k::linear_forward(out, act, p(w.fc_proj_w), p(w.fc_proj_b), N, F, C);
  }
  for (size_t i = 0; i < size_t(N) * C; ++i) out[i] += mid[i];
  if (a.policy != ActivationPolicy::KeepAll) a.recomputed_layer = l;
}

template <class T>
void Gpt<T>::ensure_scratch(long N) {
  const GptConfig& c = config_;
  auto fit = [](Buffer<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  fit(dln_, N * c.hidden);
  fit(dqkv_, N * c.qkv_width());
  fit(dattn_, N * c.attn_width());
  fit(dfc_, N * c.fc_width());
  fit(dact_, N * c.ffn);
  fit(dlogits_, N * c.vocab);
}

template <class T>
void Gpt<T>::backward(Activations<T>& a, int lo, int hi, T loss_scale) {
  const GptConfig& c = config_;
  if (lo < 0 || hi > c.layers || lo >= hi)
    throw std::invalid_argument("backward of an empty or invalid layer range");
  const int B = a.B, Tn = a.Tn, N = B * Tn, C = c.hidden, H = c.heads, K = c.kv_heads, D = c.head_dim;
  const int QKV = c.qkv_width(), HD = c.attn_width(), F = c.ffn, FW = c.fc_width(), V = c.vocab;
  const bool ln = !c.rmsnorm;
  {
    MemoryUseScope use(MemoryUse::Other);
    ensure_scratch(N);
  }
  T* dres = a.dresidual.data();  // (N,C): d loss / d residual stream at the current layer boundary
  if (hi == c.layers) {
    // Loss and head: dlogits (N,V); the mean over N tokens, scaled for gradient accumulation.
    k::cross_entropy_backward(dlogits_.data(), a.probs.data(), a.targets.data(), N, V, loss_scale / T(N));
    // dlnf (N,C) = dlogits . head; dhead (V,C) += dlogits^T . lnf
    {
      KernelTimer timer(kernel_seconds.dense_s);
      k::gemm(false, false, N, C, V, T(1), dlogits_.data(), V, head(), C, T(0), dln_.data(), C);
      k::gemm(true, false, V, C, N, T(1), dlogits_.data(), V, a.lnf.data(), C, T(1), dhead(), C);
    }
    std::fill(dres, dres + size_t(N) * C, T(0));
    k::norm_backward(dres, g(lnf_w_), g(lnf_b_), dln_.data(), a.residual.data() + size_t(c.layers) * N * C,
                     p(lnf_w_), ln ? a.lnf_mean.data() : nullptr, a.lnf_rstd.data(), N, C);
  }
  for (int l = hi - 1; l >= lo; --l) {
    const LayerOffsets& w = layers_[l];
    if (a.policy != ActivationPolicy::KeepAll && a.recomputed_layer != l) recompute(a, l);
    const size_t s = a.policy == ActivationPolicy::RecomputeLayers ? 0 : size_t(l);
    const size_t sa = a.policy == ActivationPolicy::KeepAll ? size_t(l) : 0;
    const size_t nc = s * N * C, n1 = s * N;
    const T* x = a.residual.data() + size_t(l) * N * C;
    const T* ln1 = a.ln1.data() + nc;
    const T* qkv = a.qkv.data() + s * N * QKV;
    const T* att = a.att.data() + sa * B * H * Tn * Tn;
    const T* attn_out = a.attn_out.data() + s * N * HD;
    const T* mid = a.mid.data() + nc;
    const T* ln2 = a.ln2.data() + nc;
    const T* fc = a.fc.data() + s * N * FW;
    const T* act = a.fc_act.data() + s * N * F;

    // MLP: dres (N,C) is the gradient of the layer's output and, through the residual, of mid.
    std::fill(dln_.begin(), dln_.begin() + size_t(N) * C, T(0));
    if (c.moe_layer(l)) {
      moe_backward(a, l, dres, ln2, dln_.data());
    } else {
      std::fill(dact_.begin(), dact_.begin() + size_t(N) * F, T(0));
      k::linear_backward(dact_.data(), g(w.fc_proj_w), g(w.fc_proj_b), dres, act, p(w.fc_proj_w), N, F, C);
      k::mlp_activation_backward(dfc_.data(), fc, dact_.data(), N, F, c.swiglu);
      k::linear_backward(dln_.data(), g(w.fc_w), g(w.fc_b), dfc_.data(), ln2, p(w.fc_w), N, C, FW);
    }
    k::norm_backward(dres, g(w.ln2_w), g(w.ln2_b), dln_.data(), mid, p(w.ln2_w),
                     ln ? a.ln2_mean.data() + n1 : nullptr, a.ln2_rstd.data() + n1, N,
                     C);  // dres is now d loss / d mid
    // Attention: the same pattern around the attention core.
    std::fill(dattn_.begin(), dattn_.begin() + size_t(N) * HD, T(0));
    k::linear_backward(dattn_.data(), g(w.attn_proj_w), g(w.attn_proj_b), dres, attn_out, p(w.attn_proj_w), N,
                       HD, C);
    k::attention_backward(dqkv_.data(), dattn_.data(), qkv, att, B, Tn, H, K, D);
    if (c.rope) k::rope(dqkv_.data(), B, Tn, H, K, D, true, nullptr, rotary_);
    std::fill(dln_.begin(), dln_.begin() + size_t(N) * C, T(0));
    k::linear_backward(dln_.data(), g(w.qkv_w), g(w.qkv_b), dqkv_.data(), ln1, p(w.qkv_w), N, C, QKV);
    k::norm_backward(dres, g(w.ln1_w), g(w.ln1_b), dln_.data(), x, p(w.ln1_w),
                     ln ? a.ln1_mean.data() + n1 : nullptr, a.ln1_rstd.data() + n1, N,
                     C);  // dres is now d loss / d x, the layer's input
  }
  if (lo == 0)
    k::embedding_backward(g(wte_), c.learned_positions() ? g(wpe_) : nullptr, dres, a.tokens.data(), B, Tn,
                          C);
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace paratwin::exec
