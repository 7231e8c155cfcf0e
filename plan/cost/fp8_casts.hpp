// The memory-bound passes that fp8 training runs around each linear layer's fp8 GEMMs: quantizing the
// input, the weight and the output gradient to fp8, the amax reductions their scales come from, and
// the transposed copies the weight- and input-gradient GEMMs need (Hopper's fp8 GEMMs take their
// operands K-major only: cuBLAS's TN layout, torch._scaled_mm's row-major by column-major), as each
// training.fp8_recipe runs them. docs/plans-and-cost-model.md, "fp8 casts", cites the sources.
#pragma once

#include <vector>

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// What produces a linear layer's input, which decides whether its quantization fuses into the kernel
// before it: a norm (Transformer Engine's LayerNormLinear quantizes in the norm kernel; Inductor fuses
// the amax reduction into the norm), an elementwise activation (Inductor fuses the amax into it;
// Megatron-Core's activation is a kernel of its own before a TE Linear), or something else (the
// attention kernel's output, the MoE dispatcher's permuted rows): a pass of its own.
enum class Fp8Input { Norm, Activation, Other };

// One fp8 linear layer of a transformer layer as one rank runs it: an (rows x k) input by `weight_copies`
// (k x n) weights (a grouped expert GEMM reads several) into an (rows x n) output.
struct Fp8Linear {
  double rows = 0;       // the GEMM's rows (with sequence parallelism, after the input's all-gather)
  double cast_rows = 0;  // the rows its input is quantized over: before the all-gather when it gathers
  double k = 0, n = 0;
  double weight_copies = 1;
  Fp8Input input = Fp8Input::Other;
};

// The fp8 linear layers of one transformer layer on one rank, in forward order: the QKV projection
// (after the norm), the output projection (after attention), the MLP's up projection (gate and up under
// SwiGLU; after the norm, or after the dispatcher's permutation in an MoE layer) and its down projection
// (after the activation). The router and the output layer stay in 16 bits. Empty unless under fp8.
std::vector<Fp8Linear> fp8_linears(const ModelSpec& model, const LayerWork& w, bool moe_layer);

// Of them, those per-operator selective checkpointing runs again (op_checkpoint.hpp's op_recomputes; a
// separate projection as its share of the fused linear's columns).
std::vector<Fp8Linear> fp8_op_recompute_linears(const ModelSpec& model, const LayerWork& w, bool moe_layer);

// The passes a micro-batch's forward runs for `linears` under w.fp8_recipe (nothing unless
// w.precision is fp8): the inputs' quantization, and torchao's weights' cast every micro-batch.
KernelCost fp8_casts_forward(const std::vector<Fp8Linear>& linears, const LayerWork& w);

// The passes its backward runs: the output gradients' quantization, the transposes of what the forward
// quantized without one, torchao's weights' casts or copies for the input gradient.
KernelCost fp8_casts_backward(const std::vector<Fp8Linear>& linears, const LayerWork& w);

// The passes run once a step: Transformer Engine casts each weight to fp8 with its transpose at a step's
// first micro-batch and keeps both for the others (is_first_microbatch, which Megatron-Core passes);
// nothing under torchao, which casts every micro-batch (fp8_casts_forward).
KernelCost fp8_weight_casts_per_step(const std::vector<Fp8Linear>& linears, const LayerWork& w);

}  // namespace paratwin::cost
