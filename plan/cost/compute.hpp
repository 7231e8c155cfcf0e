// Compute cost of the kernels of one transformer layer (and of the embedding, head and optimizer),
// and their duration on a device by a roofline with measured efficiencies.
#pragma once

#include "plan/spec/cluster.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::cost {

// What a group of kernels does: math, memory traffic, and how many kernels it launches. GEMM FLOPs
// and elementwise (memory-bound) traffic are kept apart because they run at different rates.
struct KernelCost {
  Flops gemm_flops;         // matrix multiplications (including attention scores and values)
  Flops attention_flops;    // of gemm_flops, attention's score and value products (many small GEMMs)
  Bytes gemm_bytes;         // operand and result traffic of those GEMMs
  Bytes elementwise_bytes;  // norms, activations, residuals, dropout, softmax
  Bytes optimizer_bytes;    // the optimizer step's update kernel
  int launches = 0;

  KernelCost& operator+=(const KernelCost& o);
  KernelCost operator*(int k) const;  // k times the same work (k layers), launches included
};

// Roofline per kernel group:
//   time = max((gemm_flops - attention_flops) / (peak x efficiency.gemm)
//                + attention_flops / (peak x efficiency.attention),
//              gemm_bytes / (memory_bandwidth x efficiency.memory))
//        + elementwise_bytes / (memory_bandwidth x efficiency.memory)
//        + optimizer_bytes / (memory_bandwidth x efficiency.optimizer)
//        + launches x efficiency.kernel_launch
// (efficiency.attention defaults to .gemm, efficiency.optimizer to .memory).
// A device without a peak at `precision` is a programming error (checked when scenarios load).
Seconds compute_time(const KernelCost& cost, const DeviceSpec& device, Precision precision);

// A lower bound of compute_time that adds up over kernel groups: GEMMs at their compute rate only,
// plus elementwise traffic and launches. compute_time(a + b) >= bound(a) + bound(b) for any groups,
// which is what the optimizer's branch and bound needs.
Seconds compute_time_bound(const KernelCost& cost, const DeviceSpec& device, Precision precision);

struct LayerWork {
  int micro_batch = 1;  // b
  int seq_len = 0;      // s, full sequence; queries per rank are s / cp, keys all s
  int tp = 1;
  int cp = 1;
  bool sequence_parallel = false;
  Precision precision = Precision::Bf16;
};

// Forward of one transformer layer on one rank (1/tp of the heads and MLP columns; with SP the norms
// and dropout work on 1/tp of the tokens). GEMM FLOPs are the model FLOPs of training_flops_per_token
// divided by 3 and by tp, per token of the micro-batch on this rank: their sum over layers, ranks and
// passes equals the model's training FLOPs. `moe_layer` uses top_k experts (plus the router).
KernelCost layer_forward(const ModelSpec& model, const LayerWork& work, bool moe_layer);
// Backward: twice the forward GEMM FLOPs (input and weight gradients), about twice the traffic.
KernelCost layer_backward(const ModelSpec& model, const LayerWork& work, bool moe_layer);
// Selective recompute: the attention core (QK^T, softmax, attention over V) of the forward again.
KernelCost attention_core_forward(const ModelSpec& model, const LayerWork& work);

// Embedding lookup (memory-bound) forward; its backward is the same traffic scattered into the
// gradient.
KernelCost embedding_forward(const ModelSpec& model, const LayerWork& work);
// Final norm, logits GEMM (2 b s h V / tp FLOPs) and cross-entropy, forward; backward is 2x GEMMs.
KernelCost head_forward(const ModelSpec& model, const LayerWork& work);
KernelCost head_backward(const ModelSpec& model, const LayerWork& work);

// One optimizer step over `parameters` parameters held by this rank (its ZeRO shard): memory-bound,
// reading and writing master weights, moments, gradients and the working copy.
KernelCost optimizer_step(double parameters, OptimizerKind optimizer, Precision precision);

}  // namespace paratwin::cost
