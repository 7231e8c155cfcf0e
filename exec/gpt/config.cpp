// GPT shapes from a model file, and the flat parameter layout.
#include "exec/gpt/config.hpp"

#include <stdexcept>

namespace paratwin::exec {

GptConfig gpt_config(const ModelSpec& m) {
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    throw std::invalid_argument("model " + m.name + ": kv_heads must divide heads");
  GptConfig c;
  c.layers = m.layers;
  c.hidden = m.hidden;
  c.heads = m.heads;
  c.kv_heads = m.kv_heads;
  c.head_dim = m.head_dim;
  c.ffn = m.ffn_hidden;
  c.vocab = m.vocab;
  c.max_seq_len = m.seq_len;
  c.swiglu = m.mlp == MlpKind::SwiGlu;
  c.rmsnorm = m.norm == NormKind::RmsNorm;
  c.rope = m.position == PositionKind::Rope;
  c.alibi = m.position == PositionKind::Alibi;
  c.yarn_factor = m.yarn_factor;
  c.yarn_context = m.yarn_context();
  if (m.sliding_window > 0)
    for (int l = 0; l < m.layers; ++l) c.windows.push_back(m.attention_window(l));
  c.tied = m.tied_embeddings;
  c.bias = m.bias;
  if (m.moe) {
    c.experts = m.moe->experts;
    c.top_k = m.moe->top_k;
    c.moe_every = m.moe->every;
  }
  if (c.rope && c.head_dim % 2 != 0)
    throw std::invalid_argument("model " + m.name + ": rotary positions need an even head_dim");
  return c;
}

const ParameterTensor& ParameterLayout::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::out_of_range("no parameter tensor " + name);
}

std::pair<size_t, size_t> ParameterLayout::range(int lo, int hi) const {
  const int layers = static_cast<int>(layer_begin.size()) - 1;
  return {lo == 0 ? 0 : layer_begin[lo], hi == layers ? total : layer_begin[hi]};
}

ParameterLayout parameter_layout(const GptConfig& c) {
  ParameterLayout p;
  auto add = [&p](std::string name, size_t rows, size_t cols) {
    p.tensors.push_back({std::move(name), p.total, rows, cols});
    p.total += rows * cols;
  };
  const size_t C = c.hidden;
  add("wte", c.vocab, C);
  if (c.learned_positions()) add("wpe", c.max_seq_len, C);
  for (int l = 0; l < c.layers; ++l) {
    const std::string n = "layer" + std::to_string(l) + ".";
    p.layer_begin.push_back(p.total);
    add(n + "ln1_w", 1, C);
    if (!c.rmsnorm) add(n + "ln1_b", 1, C);
    add(n + "qkv_w", C, c.qkv_width());
    if (c.bias) add(n + "qkv_b", 1, c.qkv_width());
    add(n + "attn_proj_w", c.attn_width(), C);
    if (c.bias) add(n + "attn_proj_b", 1, C);
    add(n + "ln2_w", 1, C);
    if (!c.rmsnorm) add(n + "ln2_b", 1, C);
    // A MoE layer's router, then its experts one after another, so that each expert's four tensors
    // are one contiguous range (expert parallelism reduces them over their own replicas).
    const bool moe = c.moe_layer(l);
    if (moe) add(n + "router_w", C, c.experts);
    for (int e = 0; e < (moe ? c.experts : 1); ++e) {
      const std::string m = moe ? n + "expert" + std::to_string(e) + "." : n;
      add(m + "fc_w", C, c.fc_width());
      if (c.bias) add(m + "fc_b", 1, c.fc_width());
      add(m + "fc_proj_w", c.ffn, C);
      if (c.bias) add(m + "fc_proj_b", 1, C);
    }
  }
  p.layer_begin.push_back(p.total);
  add("lnf_w", 1, C);
  if (!c.rmsnorm) add("lnf_b", 1, C);
  if (!c.tied) add("head", c.vocab, C);  // (V,C) like wte, so both heads share one code path
  return p;
}

TensorOffsets tensor_offsets(const ParameterLayout& layout, int layers) {
  const auto off = [&layout](const std::string& name) {
    for (const auto& t : layout.tensors)
      if (t.name == name) return t.offset;
    return kNoTensor;
  };
  TensorOffsets o;
  for (int l = 0; l < layers; ++l) {
    const std::string n = "layer" + std::to_string(l) + ".";
    o.layers.push_back({off(n + "ln1_w"),
                        off(n + "ln1_b"),
                        off(n + "qkv_w"),
                        off(n + "qkv_b"),
                        off(n + "attn_proj_w"),
                        off(n + "attn_proj_b"),
                        off(n + "ln2_w"),
                        off(n + "ln2_b"),
                        off(n + "fc_w"),
                        off(n + "fc_b"),
                        off(n + "fc_proj_w"),
                        off(n + "fc_proj_b"),
                        kNoTensor,
                        {}});
    o.layers.back().router_w = off(n + "router_w");
    for (int e = 0; o.layers.back().router_w != kNoTensor; ++e) {
      const std::string m = n + "expert" + std::to_string(e) + ".";
      if (off(m + "fc_w") == kNoTensor) break;
      o.layers.back().experts.push_back(
          {off(m + "fc_w"), off(m + "fc_b"), off(m + "fc_proj_w"), off(m + "fc_proj_b")});
    }
  }
  o.wte = off("wte");
  o.wpe = off("wpe");
  o.lnf_w = off("lnf_w");
  o.lnf_b = off("lnf_b");
  o.head = off("head");
  return o;
}

}  // namespace paratwin::exec
