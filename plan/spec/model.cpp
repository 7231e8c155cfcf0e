// Model file parsing, parameter counts and FLOPs accounting.
#include "plan/spec/model.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace paratwin {

const EnumNames<MlpKind> kMlpKindNames = {{"gelu", MlpKind::Gelu}, {"swiglu", MlpKind::SwiGlu}};
const EnumNames<NormKind> kNormKindNames = {{"layernorm", NormKind::LayerNorm},
                                            {"rmsnorm", NormKind::RmsNorm}};
const EnumNames<PositionKind> kPositionKindNames = {
    {"learned", PositionKind::Learned}, {"rope", PositionKind::Rope}, {"alibi", PositionKind::Alibi}};

static int default_swiglu_ffn(int hidden) {
  // Llama: 2/3 of 4h, rounded up to a multiple of 256.
  const int raw = 8 * hidden / 3;
  return (raw + 255) / 256 * 256;
}

ModelSpec parse_model(const DocNode& node, const std::string& path, Diagnostics& diag,
                      FieldLocations* locations) {
  ModelSpec m;
  MapReader r(node, path, diag, locations);
  if (!r.is_mapping()) return m;
  r.read("name", m.name);
  r.read("description", m.description);
  r.get("source");  // free text naming where the numbers come from
  r.read("layers", m.layers, 1, 100000, true);
  r.read("hidden", m.hidden, 1, 1 << 20, true);
  r.read("heads", m.heads, 1, 1 << 16, true);
  const bool has_kv = r.read("kv_heads", m.kv_heads, 1, 1 << 16);
  const bool has_head_dim = r.read("head_dim", m.head_dim, 1, 1 << 16);
  const bool has_ffn = r.read("ffn_hidden", m.ffn_hidden, 1, 1 << 24);
  r.read("vocab", m.vocab, 1, 1 << 24, true);
  r.read("seq_len", m.seq_len, 1, 1 << 24, true);
  r.read_enum("mlp", m.mlp, kMlpKindNames);
  r.read_enum("norm", m.norm, kNormKindNames);
  r.read_enum("position", m.position, kPositionKindNames);
  r.read("tied_embeddings", m.tied_embeddings);
  r.read("bias", m.bias);
  const bool has_yarn = r.read("yarn_factor", m.yarn_factor, 1.0, 1e6);
  const bool has_yarn_context = r.read("yarn_original_context", m.yarn_original_context, 1, 1 << 24);
  r.read("sliding_window", m.sliding_window, 1, 1 << 24);
  const bool has_full_every = r.read("full_attention_every", m.full_attention_every, 1, 100000);
  m.dropout = m.mlp == MlpKind::Gelu;
  r.read("dropout", m.dropout);
  if (const DocNode* moe_node = r.get("moe")) {
    MoeSpec moe;
    MapReader mr(*moe_node, r.field("moe"), diag, locations);
    mr.read("experts", moe.experts, 1, 1 << 16, true);
    mr.read("top_k", moe.top_k, 1, 1 << 16, true);
    mr.read("every", moe.every, 1, 1 << 16);
    double factor = 0;
    if (mr.read("capacity_factor", factor, 1.0, 64.0)) moe.capacity_factor = factor;
    if (const DocNode* routing = mr.get("routing")) {
      int moe_layers = 0;
      for (int l = 0; l < m.layers; ++l) moe_layers += (l % moe.every) == moe.every - 1 ? 1 : 0;
      moe.routing = parse_moe_routing(*routing, mr.field("routing"), moe.experts, moe_layers, diag);
    }
    mr.finish();
    if (moe.experts > 0 && moe.top_k > moe.experts)
      diag.error(moe_node->find("top_k")->location, mr.field("top_k") + "=" + std::to_string(moe.top_k) +
                                                        " exceeds " + mr.field("experts") + "=" +
                                                        std::to_string(moe.experts));
    m.moe = moe;
  }
  r.finish();

  if (m.heads > 0) {
    if (!has_kv) m.kv_heads = m.heads;
    if (!has_head_dim && m.hidden > 0) {
      if (m.hidden % m.heads != 0)
        diag.error(node.find("heads")->location, r.field("hidden") + "=" + std::to_string(m.hidden) +
                                                     " is not divisible by " + r.field("heads") + "=" +
                                                     std::to_string(m.heads) +
                                                     "; give head_dim explicitly or change heads");
      m.head_dim = m.hidden / m.heads;
    }
    if (m.kv_heads > 0 && m.heads % m.kv_heads != 0)
      diag.error(node.find("kv_heads")->location, r.field("heads") + "=" + std::to_string(m.heads) +
                                                      " is not divisible by " + r.field("kv_heads") + "=" +
                                                      std::to_string(m.kv_heads) +
                                                      " (each key/value head serves a whole group of heads)");
  }
  // Rotary positions turn pairs of a head's dimensions.
  if (m.position == PositionKind::Rope && m.head_dim % 2 != 0)
    diag.error(node.find("position") ? node.find("position")->location : node.location,
               "position: rope needs an even head_dim, got " + r.field("head_dim") + "=" +
                   std::to_string(m.head_dim) + " (hidden / heads unless given); the nearest that works is " +
                   std::to_string(m.head_dim + 1));
  if (has_yarn && m.position != PositionKind::Rope)
    diag.error(node.find("yarn_factor")->location,
               r.field("yarn_factor") + " scales rotary embeddings; it needs position: rope, got position: " +
                   enum_name(m.position, kPositionKindNames));
  if (has_yarn_context && m.yarn_factor == 1)
    diag.error(node.find("yarn_original_context")->location,
               r.field("yarn_original_context") +
                   " is the context YaRN extends; it needs a yarn_factor above 1, which is not given");
  if (has_full_every && m.sliding_window == 0)
    diag.error(node.find("full_attention_every")->location,
               r.field("full_attention_every") +
                   " says which layers keep full attention among windowed ones; it needs " +
                   r.field("sliding_window") + " (the keys a windowed layer attends), which is not given");
  if (!has_ffn && m.hidden > 0)
    m.ffn_hidden = m.mlp == MlpKind::SwiGlu ? default_swiglu_ffn(m.hidden) : 4 * m.hidden;
  return m;
}

std::string to_yaml(const ModelSpec& m) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  auto n = [](int v) { return std::to_string(v); };
  std::string y =
      "name: " + nlohmann::json(m.name).dump() + "\nlayers: " + n(m.layers) + "\nhidden: " + n(m.hidden) +
      "\nheads: " + n(m.heads) + "\nkv_heads: " + n(m.kv_heads) + "\nhead_dim: " + n(m.head_dim) +
      "\nffn_hidden: " + n(m.ffn_hidden) + "\nvocab: " + n(m.vocab) + "\nseq_len: " + n(m.seq_len) +
      "\nmlp: " + enum_name(m.mlp, kMlpKindNames) + "\nnorm: " + enum_name(m.norm, kNormKindNames) +
      "\nposition: " + enum_name(m.position, kPositionKindNames) +
      "\ntied_embeddings: " + b(m.tied_embeddings) + "\nbias: " + b(m.bias) + "\ndropout: " + b(m.dropout) +
      "\n";
  if (m.yarn_factor != 1) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.17g", m.yarn_factor);
    y += std::string("yarn_factor: ") + factor + "\n";
  }
  if (m.yarn_original_context > 0) y += "yarn_original_context: " + n(m.yarn_original_context) + "\n";
  if (m.sliding_window > 0) y += "sliding_window: " + n(m.sliding_window) + "\n";
  if (m.full_attention_every > 0) y += "full_attention_every: " + n(m.full_attention_every) + "\n";
  if (m.moe) {
    y +=
        "moe: {experts: " + n(m.moe->experts) + ", top_k: " + n(m.moe->top_k) + ", every: " + n(m.moe->every);
    if (m.moe->capacity_factor) {
      char factor[32];
      std::snprintf(factor, sizeof factor, "%.17g", *m.moe->capacity_factor);
      y += std::string(", capacity_factor: ") + factor;
    }
    if (!m.moe->routing.balanced()) y += ", routing: " + to_yaml(m.moe->routing);
    y += "}\n";
  }
  return y;
}

ParameterCount count_parameters(const ModelSpec& m) {
  const double h = m.hidden, a = double(m.heads) * m.head_dim, k = double(m.kv_heads) * m.head_dim;
  const double f = m.ffn_hidden, V = m.vocab;
  const double attention = h * (a + 2 * k) + a * h + (m.bias ? a + 2 * k + h : 0);
  const double mlp = (m.mlp == MlpKind::SwiGlu ? 3 * h * f : 2 * h * f) + (m.bias ? f + h : 0);
  const double norm = m.norm == NormKind::LayerNorm ? 2 * h : h;

  ParameterCount c;
  c.per_dense_layer = attention + mlp + 2 * norm;
  double active_layers = 0;
  int moe_layers = 0;
  if (m.moe) {
    c.per_moe_layer = attention + m.moe->experts * mlp + h * m.moe->experts + 2 * norm;
    c.per_expert = mlp;
    c.experts = m.moe->experts;
    for (int l = 0; l < m.layers; ++l) moe_layers += m.is_moe_layer(l) ? 1 : 0;
    active_layers = moe_layers * (attention + m.moe->top_k * mlp + h * m.moe->experts + 2 * norm);
  }
  const int dense_layers = m.layers - moe_layers;
  c.embedding = V * h + (m.position == PositionKind::Learned ? double(m.seq_len) * h : 0) +
                (m.tied_embeddings ? 0 : V * h);
  c.final_norm = norm;
  c.total = c.embedding + dense_layers * c.per_dense_layer + moe_layers * c.per_moe_layer + norm;
  c.active = c.embedding + dense_layers * c.per_dense_layer + active_layers + norm;
  return c;
}

double moe_layer_expert_parameters(const ParameterCount& c, int ep) {
  return c.per_expert * c.experts / ep;
}

double moe_layer_parameters(const ParameterCount& c, int ep) {
  return c.per_moe_layer - c.per_expert * c.experts + moe_layer_expert_parameters(c, ep);
}

double training_flops_per_token(const ModelSpec& m, int seq_len) {
  const double h = m.hidden, a = double(m.heads) * m.head_dim, k = double(m.kv_heads) * m.head_dim;
  const double f = m.ffn_hidden, V = m.vocab;
  const double attention_matmul = h * (a + 2 * k) + a * h;
  const double mlp_matmul = m.mlp == MlpKind::SwiGlu ? 3 * h * f : 2 * h * f;
  double forward = 0;
  for (int l = 0; l < m.layers; ++l) {
    const double experts = m.is_moe_layer(l) ? m.moe->top_k : 1;
    const double router = m.is_moe_layer(l) ? h * m.moe->experts : 0;
    forward += 2 * (attention_matmul + experts * mlp_matmul + router);
    forward += 4.0 * seq_len * a;  // QK^T and softmax x V
  }
  forward += 2 * V * h;  // logits
  return 3 * forward;
}

}  // namespace paratwin
