// The rotary embedding as eager PyTorch model code runs it (training.kernels eager): which ops rotate
// the queries and the keys, and what their forward and autograd backward move through HBM.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// The queries' and keys' rotation in eager PyTorch over `elements` query and key elements (all heads,
// this rank's share) of `tokens` tokens at e bytes an element and `head_dim` wide heads.
//
// Rotary::Complex (torchtitan's and Meta's Llama apply_rotary_emb): each tensor upcast to fp32, viewed
// as complex numbers, multiplied by the frequencies (reads 4, writes 4) and cast back: 8 bytes an
// element besides the upcast's round trip, 3 launches a tensor in bf16. Its backward is its forward's
// traffic twice (the caller's backward_of, as every memory-bound kernel's).
//
// Rotary::RotationMatrix (foundation-model-stack's RotaryEmbedding.adjusted_qk, fms/modules/positions.py
// at f29e546d, the LLaMA that fms-fsdp trains): once a layer, the positions (arange, repeat, max, add)
// and a gather of each token's cached fp32 2 x 2 rotation matrices (reads and writes head_dim / 2 x 4
// floats a token); then each tensor upcast (q.float(), viewed as pairs), the pairs times their
// matrices broadcast over the heads (reads 4, writes 8: two fp32 products an element), summed over
// the pair (reads 8, writes 4) and cast back: 24 bytes an element besides the round trip, 4 launches a
// tensor. Its autograd backward (`backward`): the cast's (e + 4), the sum's is an expand (a view),
// the product's gradient (reads 4, writes 8) reduced over the broadcast dimension to the pair (reads
// 8, writes 4), and the upcast's (4 + e): 24 bytes an element besides the round trip again, 4 launches
// a tensor; the matrices take no gradient.
KernelCost eager_rotary(Rotary rotary, double elements, double tokens, int head_dim, double e, bool backward);

// Whether the model code's rotation runs as its own ATen ops (eager_rotary): always in eager PyTorch;
// under torch.compile when it multiplies complex numbers, which Inductor leaves to ATen (an upcast
// kernel, ATen's complex product, a cast back: the eager traffic; its backward is the same again).
bool runs_eager_rotary(const LayerWork& w);

// Whether the layer's backward runs the rotation's own backward (eager_rotary with backward true)
// rather than its forward's traffic twice: eager kernels, rotary position and Rotary::RotationMatrix.
bool eager_rotary_has_own_backward(const ModelSpec& m, const LayerWork& w);

}  // namespace paratwin::cost
