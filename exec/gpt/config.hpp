// The shapes of the GPT the live backend trains, taken from a catalog model file, and the layout of
// its parameters in one flat buffer.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "plan/spec/model.hpp"

namespace paratwin::exec {

struct GptConfig {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int max_seq_len = 0;  // rows of the learned position table
  bool swiglu = false, rmsnorm = false, rope = false, tied = true, bias = true;
  bool alibi = false;      // ALiBi's bias on the attention scores instead of a position embedding
  double yarn_factor = 1;  // YaRN's scaling of the rotary embedding over yarn_context tokens (1: none)
  int yarn_context = 0;
  std::vector<int> windows;  // each layer's sliding window (ModelSpec::attention_window); empty: none
  // Mixture of experts: every moe_every-th layer's MLP is `experts` MLPs of width ffn, each token routed
  // to its top_k (experts = 0: a dense model).
  int experts = 0, top_k = 0, moe_every = 1;

  bool moe_layer(int layer) const { return experts > 0 && layer % moe_every == moe_every - 1; }
  // A learned position table (wpe) unless rotary embeddings or ALiBi give the positions.
  bool learned_positions() const { return !rope && !alibi; }
  int window(int layer) const { return windows.empty() ? 0 : windows[size_t(layer)]; }

  int qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  int attn_width() const { return heads * head_dim; }
  int fc_width() const { return swiglu ? 2 * ffn : ffn; }  // SwiGLU's gate and up projections side by side
};

// Throws std::invalid_argument naming what the live backend cannot train (an odd head_dim with rotary
// positions, kv_heads that do not divide heads).
GptConfig gpt_config(const ModelSpec& model);

// One named parameter tensor inside the flat buffer.
struct ParameterTensor {
  std::string name;  // "wte", "layer2.qkv_w", ...
  size_t offset = 0, rows = 0, cols = 0;
  size_t size() const { return rows * cols; }
};

// Parameters in gradient-bucket order reversed: embeddings, layer 0 ... layer L-1, final norm and
// untied head. So the parameters of layers [lo, hi) are one contiguous range, and a DP bucket that
// covers them (with the embeddings when lo = 0, the final norm and head when hi = L) is a slice of
// the gradient buffer that one non-blocking all-reduce can take.
struct ParameterLayout {
  std::vector<ParameterTensor> tensors;
  std::vector<size_t> layer_begin;  // offset of layer l's first parameter; layer_begin[L] = final norm
  size_t total = 0;

  const ParameterTensor& find(const std::string& name) const;  // throws std::out_of_range
  // [begin, end) of the parameters that layers [lo, hi) own, with the embeddings when lo = 0 and the
  // final norm and head when hi = layers.
  std::pair<size_t, size_t> range(int lo, int hi) const;
};

ParameterLayout parameter_layout(const GptConfig& config);

// Where each named tensor starts in a layout, for the models that index their flat buffers by it
// (the CPU and CUDA GPTs); kNoTensor where the model has none (a Llama-shaped model's biases, a tied
// head).
inline constexpr size_t kNoTensor = std::numeric_limits<size_t>::max();
// An MLP's four tensors: the dense layer's, or one expert's.
struct MlpOffsets {
  size_t fc_w, fc_b, fc_proj_w, fc_proj_b;
};
struct LayerOffsets {
  size_t ln1_w, ln1_b, qkv_w, qkv_b, attn_proj_w, attn_proj_b, ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
  size_t router_w = kNoTensor;      // MoE layers: (C,E), no bias (Mixtral); their fc_* are kNoTensor
  std::vector<MlpOffsets> experts;  // MoE layers: expert e's MLP
};
struct TensorOffsets {
  std::vector<LayerOffsets> layers;
  size_t wte, wpe, lnf_w, lnf_b, head;
};
TensorOffsets tensor_offsets(const ParameterLayout& layout, int layers);

}  // namespace paratwin::exec
