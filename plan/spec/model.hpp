// A decoder-only transformer as the catalog's model files describe it, and the counts derived from it.
#pragma once

#include <algorithm>

#include <cstdint>
#include <optional>
#include <string>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/moe_routing.hpp"
#include "plan/spec/reader.hpp"

namespace paratwin {

enum class MlpKind { Gelu, SwiGlu };
enum class NormKind { LayerNorm, RmsNorm };
// learned: a position embedding table; rope: rotary embeddings of queries and keys; alibi: no position
// parameters, a per-head linear bias added to the attention scores (BLOOM, MPT).
enum class PositionKind { Learned, Rope, Alibi };

extern const EnumNames<MlpKind> kMlpKindNames;
extern const EnumNames<NormKind> kNormKindNames;
extern const EnumNames<PositionKind> kPositionKindNames;

// Mixture of experts: every `every`-th layer's MLP is `experts` copies, each token routed to `top_k`
// as `routing` says. With a capacity factor an expert takes at most capacity_factor x its balanced
// share of the assignments and drops the rest; without one routing is dropless (Megatron-LM's default).
struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int every = 1;
  std::optional<double> capacity_factor;
  MoeRouting routing;
};

struct ModelSpec {
  std::string name;
  std::string description;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;    // grouped-query attention when below heads
  int head_dim = 0;    // hidden / heads unless given
  int ffn_hidden = 0;  // 4 x hidden for GELU, Llama's 8/3 x hidden rounded up to 256 for SwiGLU
  int vocab = 0;
  int seq_len = 0;  // the longest sequence the model supports
  MlpKind mlp = MlpKind::Gelu;
  NormKind norm = NormKind::LayerNorm;
  PositionKind position = PositionKind::Learned;
  bool tied_embeddings = true;
  bool bias = true;     // biases on linear layers (GPT) or none (Llama)
  bool dropout = true;  // dropout after attention and MLP (GPT); Llama trains without; default: GELU models
  // YaRN-scaled rotary embedding (position rope only): the context-extension factor (Hugging Face's
  // rope_scaling factor; GPT-OSS 32). Above 1 the cos and sin carry YaRN's attention factor
  // 0.1 ln(factor) + 1, which Transformer Engine's fused RoPE cannot apply
  // (plan/cost/megatron_eager_ops.hpp). 1: plain RoPE.
  double yarn_factor = 1;
  // YaRN's original context: the sequence length the rotary frequencies were trained for before the
  // extension (Hugging Face's original_max_position_embeddings; GPT-OSS 4096). 0: seq_len / yarn_factor.
  int yarn_original_context = 0;
  int yarn_context() const {
    return yarn_original_context > 0 ? yarn_original_context : std::max(1, int(seq_len / yarn_factor + 0.5));
  }
  // Sliding-window attention: a windowed layer's queries attend to the `sliding_window` latest keys,
  // themselves included (Hugging Face's sliding_window; Transformer Engine's window_size
  // (sliding_window - 1, 0)). 0: every layer attends over the whole causal prefix. With
  // full_attention_every n > 0 every n-th layer (1-based numbers that n divides) keeps full attention,
  // the others are windowed (Megatron-Core's window_attn_skip_freq: GPT-OSS's n = 2); 0: all windowed.
  int sliding_window = 0;
  int full_attention_every = 0;
  std::optional<MoeSpec> moe;

  bool is_moe_layer(int layer) const { return moe && (layer % moe->every) == moe->every - 1; }
  // The keys a query of layer `layer` (0-based) attends at most: 0 for the whole causal prefix.
  int attention_window(int layer) const {
    if (sliding_window <= 0) return 0;
    const bool full = full_attention_every > 0 && (layer + 1) % full_attention_every == 0;
    return full ? 0 : sliding_window;
  }
};

// Parses a model mapping; `path` prefixes field names in messages ("model").
ModelSpec parse_model(const DocNode& node, const std::string& path, Diagnostics& diag,
                      FieldLocations* locations = nullptr);

// The model as a model file with every field given; parse_model reads it back to an equal ModelSpec.
std::string to_yaml(const ModelSpec& model);

// Parameter counts. Formulas (h hidden, a = heads x head_dim, k = kv_heads x head_dim, f ffn, V vocab):
//   attention  h(a + 2k) + a h            (+ a + 2k + h biases)
//   MLP        2 h f (GELU) or 3 h f (SwiGLU)  (+ f + h biases); MoE: experts copies + h x experts router
//   norms      2 per layer + 1 final; 2h each (LayerNorm) or h (RMSNorm)
//   embedding  V h (+ seq_len h learned positions); head V h unless tied
struct ParameterCount {
  double total = 0;
  double embedding = 0;  // token (+ position) embedding and an untied head
  double per_dense_layer = 0;
  double per_moe_layer = 0;  // 0 without MoE
  double per_expert = 0;     // one expert's MLP; 0 without MoE
  double final_norm = 0;     // the norm after the last layer
  int experts = 0;           // per MoE layer
  double active = 0;         // what one token touches: top_k experts instead of all
};
ParameterCount count_parameters(const ModelSpec& model);

// What a rank holds of one MoE layer when ep ranks share its experts (all but the other ranks'
// experts), and of those its experts' parameters.
double moe_layer_parameters(const ParameterCount& count, int ep);
double moe_layer_expert_parameters(const ParameterCount& count, int ep);

// Model FLOPs per token of training (forward + backward = 3 x forward) at sequence length `seq_len`:
// 2 FLOPs per multiply-accumulate of every matmul a token passes (its active parameters and the logits),
// plus attention scores and values, 4 x seq_len x heads x head_dim per layer forward (full, not causal,
// as Megatron-LM counts). For GPT this equals 72 L h^2 (1 + s/6h + V/12Lh). No recompute.
double training_flops_per_token(const ModelSpec& model, int seq_len);

}  // namespace paratwin
