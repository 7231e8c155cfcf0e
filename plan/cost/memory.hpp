// Memory per rank: model states under mixed precision and ZeRO, and activations per layer by
// recompute mode, tensor/sequence/context parallelism. Formulas from the ZeRO paper (Rajbhandari
// et al. 2020, section 3) and from Korthikanti et al. 2022 ("Reducing Activation Recomputation in
// Large Transformer Models", section 4), generalized to GQA, SwiGLU and models without dropout.
#pragma once

#include "plan/spec/cluster.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::cost {

// Bytes of one element of weights/activations at a training precision: fp32/tf32 4, fp16/bf16 2,
// fp8 2 as well (activations and weights stay bf16 under FP8 GEMMs).
double element_bytes(Precision precision);

// Bytes of one gradient element, in the buffers and the data-parallel reductions:
// training.grad_reduce's, else element_bytes of the training precision.
double gradient_bytes(const TrainingSpec& training);

// Bytes a parameter of the gradient buffer a rank keeps whole over the micro-batches of a step and
// zeroes once a step: gradient_bytes under ZeRO 0 and 1 (Megatron-Core's DistributedDataParallel
// main_grad buffers, fp32 unless --grad-reduce-in-bf16; DeepSpeed's BF16_Optimizer fp32 gradients),
// 0 where the gradients are sharded (ZeRO 2 and 3: FSDP reduce-scatters them).
double gradient_buffer_bytes(const TrainingSpec& training, int zero);

// Bytes a parameter of the 16-bit gradients a rank keeps beside that buffer under
// training.grad_accumulation copy (DeepSpeed's BF16_Optimizer holds autograd's bf16 gradients from one
// backward to the next): element_bytes of the training precision where there is a buffer, else 0.
double gradient_copy_bytes(const TrainingSpec& training, int zero);

// Bytes a parameter of the 16-bit gradient each micro-batch's backward adds into that buffer by a
// kernel of its own (training.grad_accumulation copy or unfused; cost::gradient_copy): element_bytes
// of the training precision where there is a buffer, else 0 (in place: the GEMMs accumulate).
double gradient_add_bytes(const TrainingSpec& training, int zero);

// Bytes of one weight in the data-parallel weight gathers: 1 under fp8 with training.fp8_param_gather,
// else element_bytes of the training precision.
double gathered_weight_bytes(const TrainingSpec& training);

struct ModelStateBytes {
  Bytes weights;    // the working copy the GEMMs read (bf16 under mixed precision)
  Bytes gradients;  // gradient buffer
  Bytes optimizer;  // fp32 master weights + optimizer moments (the ZeRO paper's K x Psi)

  Bytes total() const { return weights + gradients + optimizer; }
};

// The ZeRO paper's K: optimizer-state bytes per parameter. Mixed precision (bf16/fp16/fp8): AdamW and
// Adam 12 (fp32 master, m, v), SGD with momentum 8 (master, momentum). fp32/tf32: Adam 8 (m, v; the
// weights are the master), SGD 4.
double optimizer_bytes_per_parameter(OptimizerKind optimizer, Precision precision);

// Model states of a rank holding `parameters` parameters (its TP/PP share), data-parallel degree
// `dp`, ZeRO stage 0-3:
//   ZeRO-0: (2 + 2 + K) Psi      ZeRO-1: 2 Psi + 2 Psi + K Psi / dp
//   ZeRO-2: 2 Psi + (2 + K) Psi / dp      ZeRO-3: (2 + 2 + K) Psi / dp
// (2 stands for element_bytes: 4 under fp32; the gradients' for `gradient_element` bytes.)
ModelStateBytes model_state_bytes(double parameters, int dp, int zero, OptimizerKind optimizer,
                                  Precision precision, double gradient_element);

// What a rank of the lowered Program holds: model_state_bytes at the training's optimizer, precision and
// gradient_bytes, except that
//   - the gradient buffer is whole unless `gradients_sharded`. ZeRO 2 and 3 reduce-scatter every
//     micro-batch's gradients into the rank's partition (DeepSpeed, FSDP; gradients_sharded), but with
//     compression they are exchanged once a step, as under ZeRO 1 (Megatron-LM's distributed
//     optimizer), after the last micro-batch's backward, so every backward accumulates into the whole
//     buffer;
//   - beside it, under training.grad_accumulation copy, the 16-bit gradients (gradient_copy_bytes);
//   - under ZeRO 3 with PyTorch FSDP (training.fsdp) and mixed precision there is no 16-bit shard of the
//     weights: FSDP's sharded parameters are the fp32 master copy the optimizer's K counts, cast to 16
//     bits only into a unit's gathered buffer (DeepSpeed's ZeRO 3 keeps a 16-bit partition beside its
//     fp32 one).
ModelStateBytes held_model_state_bytes(double parameters, int dp, int zero, bool gradients_sharded,
                                       const TrainingSpec& training);

// Device bytes a rank keeps for gradient compression over `parameters` gradients: top-k with error
// feedback keeps the residual not sent yet, one fp32 value per gradient; otherwise none.
Bytes compression_buffer_bytes(const CompressionSpec& compression, double parameters, int dp);

struct ActivationConfig {
  int micro_batch = 1;  // b, sequences
  int seq_len = 0;      // s, the full sequence (context parallelism divides it by cp)
  int tp = 1;           // t
  int cp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
  Precision precision = Precision::Bf16;
  AttentionKind attention = AttentionKind::Flash;
  CrossEntropy cross_entropy = CrossEntropy::Unfused;  // training.cross_entropy (the head's softmax)
  // dtensor: the QKV and MLP inputs are kept as gathered, whole, under sequence parallelism.
  TensorParallelImpl tensor_parallel = TensorParallelImpl::Megatron;  // training.tensor_parallel
  RecomputeModules recompute_modules{};  // what selective recompute drops (StagePlan::recompute_modules)
  Projections projections = Projections::Fused;  // training.projections: which outputs recompute op keeps
  Fp8Recipe fp8_recipe = Fp8Recipe::TeDelayed;   // under precision fp8: how the GEMM inputs are kept
};

// Whether the linear layers keep their GEMM inputs for the backward in fp8, 1 byte an element: under
// precision fp8 with Transformer Engine's recipes, whose Linear, LayerNormLinear and LayerNormMLP save
// the fp8 casts they ran the forward GEMM on (the norm's output written in fp8 by the fused norm, the
// MLP activation's output cast for the second GEMM) and cast nothing again in the backward. torchao's
// Float8Linear keeps the 16-bit inputs and casts them again (matmul_with_hp_or_float8_args).
bool keeps_fp8_gemm_inputs(const ActivationConfig& config);

// Activation bytes one transformer layer keeps for its backward pass, per micro-batch. For GPT (4h
// GELU MLP, MHA, dropout, 16-bit GEMM inputs) this is Korthikanti et al.'s table 2:
//   none, no SP:        s b h (10 + 24/t + 5 a s / (h t))
//   none, SP:           s b h (34/t + 5 a s / (h t))
//   selective, no SP:   s b h (10 + 24/t)
//   selective, SP:      s b h (34/t)
//   full:               2 s b h (no SP) or 2 s b h / t (SP): the layer input only
//   op:                 the input, every other linear's output and attention's (torchtitan's per-
//                       operator policy; see op_kept_bytes in memory.cpp): between full and none
// where a is the number of heads. Context parallelism divides s by cp. MoE layers keep top_k expert
// MLP activations per token plus the router's. Fused (flash) attention keeps no s x s term: it
// recomputes the scores in its backward from Q, K, V and one fp32 log-sum-exp per query and head
// (4 a s b / t bytes), which selective recomputation does not drop. Where the GEMM inputs are kept in
// fp8 (keeps_fp8_gemm_inputs), the QKV and dense MLP inputs (the norms' outputs) and the second MLP
// GEMM's input take 1 byte an element, and the output projection's fp8 input is a copy beside the
// 16-bit attention output a fused attention kernel keeps (under unfused attention, the only one).
Bytes layer_activation_bytes(const ModelSpec& model, const ActivationConfig& config, bool moe_layer);

// What recomputing one layer holds beside the kept activations while its backward runs: the bytes
// config.recompute drops from that layer (all but its input under full recomputation, the attention
// core under selective, all but the kept operators' outputs under op; none without recomputation).
// Recomputation goes layer by layer (Megatron-LM, the live engine), so one layer's worth exists at a time.
Bytes recompute_working_bytes(const ModelSpec& model, const ActivationConfig& config, bool moe_layer);

// The embedding's output kept for backward (s b h, split by SP) and, on the last stage, the logits in
// 16 bits plus fp32 softmax for the loss: s b V (2 + 4) / t.
Bytes embedding_activation_bytes(const ModelSpec& model, const ActivationConfig& config);
Bytes head_activation_bytes(const ModelSpec& model, const ActivationConfig& config);

// What the loss's backward allocates beyond head_activation_bytes while it runs, per micro-batch. unfused
// (PyTorch's F.cross_entropy over the logits' fp32 upcast): nll_loss's backward writes a dense fp32
// gradient of the log-softmax output and log_softmax's backward another for its input, both beside the
// saved output, 12 bytes a logit at once against the e + 4 kept (the 16-bit logits are freed before the
// backward: torchtitan's `del pred`), so 8 - e more. vocab_parallel turns its saved fp32 softmax into the
// gradient in place (Megatron-LM's calculate_gradients) and fused keeps no softmax: 0.
Bytes head_backward_transient_bytes(const ModelSpec& model, const ActivationConfig& config);

}  // namespace paratwin::cost
