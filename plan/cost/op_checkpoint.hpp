// Per-operator selective checkpointing (torchtitan's selective_ac_option "op", its _custom_policy in
// torchtitan/models/llama/parallelize_llama.py): the checkpoint keeps the layer's input, and of the
// layer's matmuls, counted in forward order, the output of every other one (the 1st, 3rd, ...); the
// others run again in the backward. The one rule of which linears those are, for the memory a layer
// keeps (memory.cpp) and what its recomputation runs (compute.cpp, fp8_casts.cpp); the live engine, which
// implements the fused case, checks that it still says so (ShardedGpt::check_op_rule).
#pragma once

#include <cstddef>
#include <vector>

#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::cost {

// A linear layer of a transformer layer.
enum class LayerLinear { Q, K, V, Qkv, Output, Gate, Up, GateUp, Down };

// The layer's linears in forward order as `projections` lays them out: separate (torchtitan's Llama:
// wq, wk, wv, wo, then w1, w3, w2 under SwiGLU) or fused (one QKV linear and one for SwiGLU's gate and
// up: Megatron-Core's linear_qkv and linear_fc1, MPT's Wqkv, the live GPT's).
std::vector<LayerLinear> layer_linears(MlpKind mlp, Projections projections);

// Whether the policy keeps the output of the linear at `index` of layer_linears: the 1st, 3rd, ...
inline bool op_keeps_output(size_t index) {
  return index % 2 == 0;
}

// Whether the backward runs the linear at `index` of `count` again: the others but the last, whose
// output no backward reads (torch.utils.checkpoint stops recomputing once every tensor the backward
// needs is back, its default early stop).
inline bool op_recomputes(size_t index, size_t count) {
  return !op_keeps_output(index) && index + 1 < count;
}

// Whether a linear is row-parallel under TP (its output the full hidden width of partial sums on every
// rank) rather than column-parallel (1/tp of its output columns).
inline bool row_parallel(LayerLinear l) {
  return l == LayerLinear::Output || l == LayerLinear::Down;
}

// Whether a linear belongs to the MLP (an MoE layer runs it over its top_k rows a token, on its experts).
inline bool mlp_linear(LayerLinear l) {
  return l == LayerLinear::Gate || l == LayerLinear::Up || l == LayerLinear::GateUp || l == LayerLinear::Down;
}

// The linear of the fused layout a linear is part of: QKV for Q, K and V; SwiGLU's gate-and-up for its
// gate or up; itself otherwise.
LayerLinear fused_linear(LayerLinear l, MlpKind mlp);

// A linear's input and output widths in the whole model (before TP splits them).
struct LinearWidths {
  double in = 0, out = 0;
};
LinearWidths linear_widths(const ModelSpec& model, LayerLinear l);

}  // namespace paratwin::cost
