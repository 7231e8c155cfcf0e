// Per-operator selective checkpointing's linears (see op_checkpoint.hpp).
#include "plan/cost/op_checkpoint.hpp"

namespace paratwin::cost {

std::vector<LayerLinear> layer_linears(MlpKind mlp, Projections projections) {
  using L = LayerLinear;
  const bool swiglu = mlp == MlpKind::SwiGlu;
  if (projections == Projections::Fused) return {L::Qkv, L::Output, swiglu ? L::GateUp : L::Up, L::Down};
  if (swiglu) return {L::Q, L::K, L::V, L::Output, L::Gate, L::Up, L::Down};
  return {L::Q, L::K, L::V, L::Output, L::Up, L::Down};
}

LayerLinear fused_linear(LayerLinear l, MlpKind mlp) {
  switch (l) {
    case LayerLinear::Q:
    case LayerLinear::K:
    case LayerLinear::V:
      return LayerLinear::Qkv;
    case LayerLinear::Gate:
    case LayerLinear::Up:
      return mlp == MlpKind::SwiGlu ? LayerLinear::GateUp : LayerLinear::Up;
    default:
      return l;
  }
}

LinearWidths linear_widths(const ModelSpec& m, LayerLinear l) {
  const double h = m.hidden, f = m.ffn_hidden;
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;
  switch (l) {
    case LayerLinear::Q:
      return {h, A};
    case LayerLinear::K:
    case LayerLinear::V:
      return {h, Kv};
    case LayerLinear::Qkv:
      return {h, A + 2 * Kv};
    case LayerLinear::Output:
      return {A, h};
    case LayerLinear::Gate:
    case LayerLinear::Up:
      return {h, f};
    case LayerLinear::GateUp:
      return {h, 2 * f};
    case LayerLinear::Down:
      return {f, h};
  }
  return {};
}

}  // namespace paratwin::cost
