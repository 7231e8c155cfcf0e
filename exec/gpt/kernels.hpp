// The kernels of the GPT: forward and backward of each layer kind, in fp32 (training) or fp64
// (finite-difference tests), written over flat row-major buffers. N = B x T tokens; every backward
// adds (+=) into weight gradients so that micro-batches accumulate, and writes or adds into input
// gradients as its comment says.
#pragma once

#include <cstdint>
#include <vector>

namespace paratwin::exec::kernels {

// ---- linear (linear.cpp) ------------------------------------------------------------------------
// out (N,OC) = inp (N,C) . weight (C,OC) + bias (OC); bias may be null.
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC);
// dinp (N,C) += dout (N,OC) . weight^T; dweight (C,OC) += inp^T . dout; dbias (OC) += column sums.
template <class T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N,
                     int C, int OC);

// ---- normalization (layernorm.cpp) --------------------------------------------------------------
// out (N,C) = (inp - mean) * rstd * weight + bias per row; saves mean (N) and rstd (N). RMSNorm when
// bias and mean are null: out = inp * rstd * weight with rstd = 1 / sqrt(mean(inp^2) + eps).
template <class T>
void norm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int N, int C);
// dinp (N,C) += the input gradient; dweight (C), dbias (C) += theirs. Null bias/mean: RMSNorm.
template <class T>
void norm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                   const T* rstd, int N, int C);

// ---- embedding (embedding.cpp) ------------------------------------------------------------------
// out (B,T,C) = wte[tokens[b,t]] + wpe[t]; wpe null with rotary positions.
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C);
// dwte (V,C), dwpe (maxT,C) += the rows dout (B,T,C) came from.
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

// ---- rotary position embedding (rope.cpp) -------------------------------------------------------
// The rotary embedding of a head of D dimensions: pair (2i, 2i+1) turns by t x inv_freq[i] at position
// t, and the rotated pair is multiplied by `scale`. RoPE: inv_freq[i] = 10000^(-2i/D), scale 1. YaRN
// (Peng et al. 2023, `yarn_factor` s over an original context L; Hugging Face's and Megatron-Core's
// rule): the pairs that turn fewer than beta_slow = 1 times over L take the frequency divided by s
// (interpolation), those that turn more than beta_fast = 32 times keep it (extrapolation), a linear
// ramp between, over dimension indices floored and ceiled; scale 0.1 ln s + 1 (the attention factor).
struct RotaryAngles {
  std::vector<double> inv_freq;  // D/2
  double scale = 1;
};
RotaryAngles rotary_angles(int D, double yarn_factor = 1, int original_context = 0);

// Rotates, in place, the query and key heads of qkv (B,T,(H+2K)D) by `angles`. `inverse` rotates back
// (the scale applied again: scale x the transpose, the backward of the forward). `positions` (T), when
// given, are the tokens' positions in their sequence (context parallelism), else t.
template <class T>
void rope(T* qkv, int B, int Tn, int H, int K, int D, bool inverse, const int* positions,
          const RotaryAngles& angles);

// ---- attention (attention.cpp) ------------------------------------------------------------------
// What a layer's attention adds to causality: ALiBi's bias (a key d positions before the query scores
// slope x d lower, one slope per query head: Press et al.'s, BLOOM's) and a sliding window (a query
// attends to the `window` latest keys, itself included; 0: the whole causal prefix). One rule for the
// kernels with and without context parallelism.
struct AttentionMask {
  const double* slopes = nullptr;  // per query head of the call (the rank's heads under TP); null: none
  int window = 0;

  bool plain() const { return !slopes && window <= 0; }
  // Whether a query at sequence position q attends to a key at position k, and the bias of its score.
  bool attends(int q, int k) const { return k <= q && (window <= 0 || q - k < window); }
  double bias(int head, int q, int k) const { return slopes ? -slopes[head] * double(q - k) : 0.0; }
};

// One query's row of scores (at sequence position `query`) over `keys` keys turned into probabilities
// in place: each score biased, the keys the mask leaves out at 0. `key_positions` (keys) are the keys'
// sequence positions; null: 0 .. keys-1.
template <class T>
void masked_softmax_row(T* row, int keys, int query, const int* key_positions, const AttentionMask& mask,
                        int head);

// ALiBi's slopes for `heads` heads: 2^(-8i/n) for i = 1..n when n is a power of two, else those of the
// largest power of two below it and every other slope of twice that (Press et al.'s reference code).
std::vector<double> alibi_slopes(int heads);

// Causal grouped-query attention. qkv (B,T,(H+2K)D) holds H query heads, then K key heads, then K
// value heads; query head h reads key/value head h / (H/K). out (B,T,H*D); att (B,H,T,T) keeps the
// softmax probabilities (zero above the diagonal and outside the mask) for the backward.
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int H, int K, int D,
                       const AttentionMask& mask = {});
// dqkv (B,T,(H+2K)D) = the gradient (written, not added); dout (B,T,H*D).
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int H, int K,
                        int D);

// ---- MLP activations (mlp.cpp) ------------------------------------------------------------------
// GELU (tanh approximation, as GPT-2): out (N,F) = gelu(inp (N,F)).
template <class T>
void gelu_forward(T* out, const T* inp, long n);
// dinp (N,F) = dout * gelu'(inp) (written).
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n);
// SwiGLU: inp (N,2F) = [gate | up]; out (N,F) = silu(gate) * up.
template <class T>
void swiglu_forward(T* out, const T* inp, int N, int F);
// dinp (N,2F) = [dgate | dup] (written); dout (N,F).
template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int N, int F);
// The MLP's activation of either kind: act (rows,F) from fc (rows,F or 2F), and its backward.
template <class T>
void mlp_activation_forward(T* act, const T* fc, int rows, int F, bool swiglu) {
  if (swiglu)
    swiglu_forward(act, fc, rows, F);
  else
    gelu_forward(act, fc, long(rows) * F);
}
template <class T>
void mlp_activation_backward(T* dfc, const T* fc, const T* dact, int rows, int F, bool swiglu) {
  if (swiglu)
    swiglu_backward(dfc, fc, dact, rows, F);
  else
    gelu_backward(dfc, fc, dact, long(rows) * F);
}

// ---- mixture-of-experts router (router.cpp) ----------------------------------------------------
// probs (N,E) = softmax(logits (N,E)) (may alias logits); chosen (N,K) = each token's K most probable
// experts, the most probable first (ties: the lower index); gates (N,K) = their probabilities divided
// by the chosen ones' sum (Mixtral's renormalized top-k).
template <class T>
void router_forward(T* probs, int32_t* chosen, T* gates, const T* logits, int N, int E, int K);
// dlogits (N,E) = the gradient (written) from dgates (N,K), through the renormalization and the
// softmax; experts not chosen get gradient only through the softmax's normalization.
template <class T>
void router_backward(T* dlogits, const T* dgates, const T* probs, const int32_t* chosen, const T* gates,
                     int N, int E, int K);

// ---- loss (cross_entropy.cpp) -------------------------------------------------------------------
// probs (N,V) = softmax(logits (N,V)) (may alias logits); losses (N) = -log probs[target]. Returns
// the mean loss over the N tokens, summed in double.
template <class T>
double cross_entropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, int N, int V);
// dlogits (N,V) = (probs - onehot(target)) * scale (written; may alias probs); scale = dloss / N for a mean
// loss.
template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, int N, int V, T scale);

}  // namespace paratwin::exec::kernels
