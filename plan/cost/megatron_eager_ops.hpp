// What Megatron-Core runs as separate eager PyTorch ops inside a layer whose other kernels are fused
// (training.kernels fused): the experts' output bias of an MoE layer with biases, added expert by expert,
// and the rotary embedding where Transformer Engine's fused kernel cannot apply it (YaRN). Each has a
// backward of its own (autograd over the same ops), not its forward's traffic twice.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// The experts' output bias (megatron/core/transformer/moe/experts.py, TEGroupedMLP._apply_bias,
// core_v0.17.0): the grouped fc2 returns its biases apart (skip_bias_add: each must be weighted by its
// row's router probability), and a Python loop over the rank's `local_experts` splits the output rows
// by expert, computes bias x probability (writes e bytes a row element) and adds it to the rows (reads
// 2 e, writes e), then concatenates the pieces (reads e, writes e): 6 e bytes per element of the
// `rows` x `hidden` output, two kernels an expert and the cat (the probabilities are in the 16-bit
// activation type, the router's unless moe_router_dtype fp32, so the final cast does nothing).
// Backward: for each expert the bias gradient (the output gradient times the probability, reads e
// writes e, summed over the rows, reads e) and the probability's (times the bias, summed over h: 3 e
// again), then the split's backward concatenates the rows' gradients (2 e): 8 e bytes, four kernels an
// expert and two cats. The fc1 bias is added inside the grouped GEMM (skip_bias_add off): not here.
KernelCost moe_expert_bias(double rows, double hidden, int local_experts, double e, bool backward);

// Whether Megatron-Core runs the model's rotary embedding unfused although its other kernels are fused:
// position rope with a YaRN factor above 1 under training.kernels fused. Its attention factor (mscale
// 0.1 ln(factor) + 1) makes apply_rotary_pos_emb take _apply_rotary_pos_emb_bshd (Transformer Engine's
// fused RoPE takes no mscale; rope_utils.py, core_v0.17.0), and Megatron-Bridge turns apply_rope_fusion
// off besides for position_embedding_type yarn (validate_rope_fusion_compatibility).
bool runs_unfused_megatron_rope(const ModelSpec& m, const LayerWork& w);

// _apply_rotary_pos_emb_bshd over the queries and the keys (`elements` in all, at e bytes), each tensor
// on its own: cos and sin of the frequencies, each times the factor and cast (six small kernels over
// s x d, their bytes not counted), then t x cos (reads e, writes e), rotate_half's negation of one half
// (e) and cat (2 e), its product by sin (2 e), the sum (3 e) and the cat with the unrotated part (2 e):
// 12 e bytes an element, 12 kernels a tensor. Backward (autograd): the two products' gradients (2 e
// each), the negation's (e), the halves' cat (2 e) and the sum of the two gradients reaching t (3 e):
// 10 e bytes, 5 kernels a tensor.
KernelCost unfused_megatron_rope(double elements, double e, bool backward);

}  // namespace paratwin::cost
