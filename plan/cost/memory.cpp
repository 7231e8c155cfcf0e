// Model-state and activation memory per rank (ZeRO paper section 3; Korthikanti et al. 2022 section 4).
#include "plan/cost/memory.hpp"

#include <cassert>

#include "plan/cost/op_checkpoint.hpp"

namespace paratwin::cost {

static bool mixed_precision(Precision p) {
  return p != Precision::Fp32 && p != Precision::Tf32;
}

double element_bytes(Precision precision) {
  return mixed_precision(precision) ? 2 : 4;
}

double gradient_bytes(const TrainingSpec& training) {
  return element_bytes(training.grad_reduce.value_or(training.precision));
}

double gradient_buffer_bytes(const TrainingSpec& training, int zero) {
  return zero <= 1 ? gradient_bytes(training) : 0;
}

double gradient_copy_bytes(const TrainingSpec& training, int zero) {
  return training.grad_accumulation == GradAccumulation::Copy ? gradient_add_bytes(training, zero) : 0;
}

double gradient_add_bytes(const TrainingSpec& training, int zero) {
  return training.grad_accumulation != GradAccumulation::InPlace && gradient_buffer_bytes(training, zero) > 0
             ? element_bytes(training.precision)
             : 0;
}

double gathered_weight_bytes(const TrainingSpec& training) {
  return training.precision == Precision::Fp8 && training.fp8_param_gather
             ? 1
             : element_bytes(training.precision);
}

double optimizer_bytes_per_parameter(OptimizerKind optimizer, Precision precision) {
  const bool adam = optimizer != OptimizerKind::Sgd;
  // Mixed precision keeps an fp32 master copy (4) beside the moments; fp32 training updates the weights.
  const double moments = adam ? 8 : 4;
  return moments + (mixed_precision(precision) ? 4 : 0);
}

ModelStateBytes model_state_bytes(double parameters, int dp, int zero, OptimizerKind optimizer,
                                  Precision precision, double gradient_element) {
  assert(dp >= 1 && "data-parallel degree must be at least 1");
  assert(zero >= 0 && zero <= 3 && "ZeRO stage must be 0, 1, 2 or 3");
  const double e = element_bytes(precision), K = optimizer_bytes_per_parameter(optimizer, precision);
  // ZeRO stage z shards the optimizer states from stage 1, the gradients from 2, the weights from 3.
  const double shard = 1.0 / dp;
  ModelStateBytes m;
  m.weights = Bytes(e * parameters * (zero >= 3 ? shard : 1));
  m.gradients = Bytes(gradient_element * parameters * (zero >= 2 ? shard : 1));
  m.optimizer = Bytes(K * parameters * (zero >= 1 ? shard : 1));
  return m;
}

ModelStateBytes held_model_state_bytes(double parameters, int dp, int zero, bool gradients_sharded,
                                       const TrainingSpec& training) {
  const double g = gradient_bytes(training);
  ModelStateBytes m = model_state_bytes(parameters, dp, zero, training.optimizer, training.precision, g);
  if (!gradients_sharded) m.gradients = Bytes(g * parameters);
  m.gradients += Bytes(gradient_copy_bytes(training, zero) * parameters);
  if (zero == 3 && training.fsdp != FsdpCopies::None && mixed_precision(training.precision))
    m.weights = Bytes(0);
  return m;
}

Bytes compression_buffer_bytes(const CompressionSpec& compression, double parameters, int dp) {
  const bool residual = compression.kind == CompressionKind::TopK && compression.error_feedback && dp > 1;
  return Bytes(residual ? 4 * parameters : 0);
}

// Korthikanti et al. section 4.1 counts, per layer, with e bytes per element (2 in their paper), A =
// heads x head_dim, Kv = kv_heads x head_dim, f = ffn_hidden, and 1-byte dropout masks:
//   outside the TP regions (split by t only with SP), per token:
//     QKV GEMM input e h, MLP input e h, two norm inputs 2 e h, two dropout masks 2 h
//                                                       (GPT: 10 h)
//   inside the TP regions (split by t), per token:
//     Q e A, K and V 2 e Kv (GQA keeps only the kv heads), output-projection input e A,
//     MLP: GELU input and output 2 e f, or SwiGLU gate, up and product 3 e f      (GPT: 24 h)
//   attention core (split by t), per query and key: softmax output e a, and with dropout its
//     mask a and output e a                                                        (GPT: 5 a s)
// Selective recompute drops the attention core (and what else its modules say: an MoE layer's norm
// output and activation output); full recompute keeps the layer input only.
// Context parallelism: a rank holds s/cp tokens, and its queries score all s keys.
// MoE: the router's input is the MLP input above; add its fp32 probabilities 4 E, top_k permuted copies
// of the token e h each (outside TP) twice: the experts' input (the first linear's weight gradient reads
// it) and their outputs back from the combine's all-to-all, which the weighted sum by the router's
// probabilities keeps for the probabilities' gradient (Transformer Engine's moe_unpermute saves its
// input when given merging probabilities; the live engine's MoeActivations::y), and top_k expert MLPs'
// intermediates (inside TP).
namespace {

// Per-operator selective checkpointing (op_checkpoint.hpp): the checkpoint keeps the layer's input and
// the outputs of every other linear (Q, V, the MLP's first and SwiGLU's down projection, separate; QKV and
// the MLP's first, fused); a row-parallel output (the down projection's) is kept before its reduction,
// all of h per token on every TP rank. torchtitan's _save_list also keeps the fused attention's output
// and log-sum-exp and the reduce-scatters' outputs (SP: after the output and down projections). Norms,
// rotary embedding, activation and residual adds are recomputed, and so is unfused attention (batched
// matmuls and softmax are not in the list): no scores are kept. MoE layers keep their router's
// probabilities and top_k rows of each kept MLP linear.
double op_kept_bytes(const ModelSpec& model, const ActivationConfig& c, bool moe_layer) {
  const double e = element_bytes(c.precision), h = model.hidden;
  const double A = double(model.heads) * model.head_dim;
  const double t = c.tp, tokens = double(c.micro_batch) * c.seq_len / c.cp;
  const double sp = c.sequence_parallel ? t : 1;
  const double k = moe_layer ? model.moe->top_k : 1;
  double outside = e * h;                                     // the layer's input
  if (c.sequence_parallel && c.tp > 1) outside += 2 * e * h;  // two reduce-scatter outputs
  if (moe_layer) outside += 4.0 * model.moe->experts;
  double bytes = tokens * outside / sp;
  const std::vector<LayerLinear> linears = layer_linears(model.mlp, c.projections);
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!op_keeps_output(i)) continue;
    const double rows = mlp_linear(linears[i]) ? k : 1;
    const double out = linear_widths(model, linears[i]).out;
    bytes += rows * tokens * e * (row_parallel(linears[i]) ? out : out / t);
  }
  if (c.attention != AttentionKind::Unfused) bytes += tokens * (e * A + 4.0 * model.heads) / t;
  return bytes;
}

}  // namespace

bool keeps_fp8_gemm_inputs(const ActivationConfig& c) {
  return c.precision == Precision::Fp8 && c.fp8_recipe != Fp8Recipe::TorchaoTensorwise;
}

Bytes layer_activation_bytes(const ModelSpec& model, const ActivationConfig& c, bool moe_layer) {
  assert(c.tp >= 1 && c.cp >= 1 && c.micro_batch >= 1 && c.seq_len >= 1 && "bad activation config");
  const double e = element_bytes(c.precision), h = model.hidden, f = model.ffn_hidden;
  const double A = double(model.heads) * model.head_dim, Kv = double(model.kv_heads) * model.head_dim;
  const double t = c.tp, tokens = double(c.micro_batch) * c.seq_len / c.cp;  // s b on this rank
  const double sp = c.sequence_parallel ? t : 1;

  if (c.recompute == Recompute::Full) return Bytes(e * tokens * h / sp);
  if (c.recompute == Recompute::Op) return Bytes(op_kept_bytes(model, c, moe_layer));

  // A GEMM input's element; an MoE layer's MLP input is the router's too, which keeps it in 16 bits.
  const bool fp8_inputs = keeps_fp8_gemm_inputs(c);
  const double in = fp8_inputs ? 1 : e, mlp_in = moe_layer ? e : in;
  // The first MLP GEMM's output (the activation's input) and the second GEMM's input.
  const double mlp_inner = (model.mlp == MlpKind::SwiGlu ? 2 : 1) * e * f + in * f;
  const bool fused = c.attention != AttentionKind::Unfused;
  // Q, K, V, and the attention output: the fused kernel's in 16 bits, the output projection's input.
  const double attention = e * (A + 2 * Kv) + (fused ? e * A : 0) + (fused && !fp8_inputs ? 0 : in * A);
  // The two norms' inputs and outputs (the QKV and MLP inputs), the dropout masks.
  double outside = 2 * e * h + (in + mlp_in) * h + (model.dropout ? 2 * h : 0);
  double inside = attention + mlp_inner;
  if (c.sequence_parallel && c.tp > 1 && c.tensor_parallel == TensorParallelImpl::DTensor) {
    // DTensor's autograd keeps the all-gathers' outputs, the QKV and MLP inputs, whole.
    outside -= (in + mlp_in) * h;
    inside += (in + mlp_in) * h * t;
  }
  const bool selective = c.recompute == Recompute::Selective;
  if (moe_layer) {
    assert(model.moe && "an MoE layer in a model without moe");
    const double k = model.moe->top_k;
    outside += 4.0 * model.moe->experts + 2 * k * e * h;
    inside += (k - 1) * mlp_inner;
    // Selective recompute of the pre-MLP norm drops its output (the router's input), of the experts'
    // activation its output (the last linear's input) for each of the top_k rows.
    if (selective && c.recompute_modules.layernorm) outside -= e * h;
    if (selective && c.recompute_modules.moe_act) inside -= k * in * f;
  }
  double bytes = tokens * (outside / sp + inside / t);
  if (c.attention != AttentionKind::Unfused) {
    bytes += 4.0 * model.heads * tokens / t;  // log-sum-exp
  } else if (c.recompute == Recompute::None || (selective && !c.recompute_modules.core_attn)) {
    const double per_score = e + (model.dropout ? 1 + e : 0);
    bytes += model.heads * tokens * c.seq_len * per_score / t;
  }
  return Bytes(bytes);
}

Bytes recompute_working_bytes(const ModelSpec& model, const ActivationConfig& c, bool moe_layer) {
  ActivationConfig kept = c;
  kept.recompute = Recompute::None;
  return layer_activation_bytes(model, kept, moe_layer) - layer_activation_bytes(model, c, moe_layer);
}

Bytes embedding_activation_bytes(const ModelSpec& model, const ActivationConfig& c) {
  const double tokens = double(c.micro_batch) * c.seq_len / c.cp;
  return Bytes(element_bytes(c.precision) * tokens * model.hidden / (c.sequence_parallel ? c.tp : 1));
}

// The rank's vocabulary-parallel logits of one micro-batch: s b V / t (s / cp under context parallelism).
static double rank_logits(const ModelSpec& model, const ActivationConfig& c) {
  return double(c.micro_batch) * c.seq_len / c.cp * model.vocab / c.tp;
}

Bytes head_activation_bytes(const ModelSpec& model, const ActivationConfig& c) {
  // The logits (e bytes) and the cross-entropy's fp32 softmax (4 bytes); a fused cross-entropy keeps the
  // logits and one log-sum-exp per token only.
  const double softmax = c.cross_entropy == CrossEntropy::Fused ? 0 : 4;
  return Bytes(rank_logits(model, c) * (element_bytes(c.precision) + softmax));
}

Bytes head_backward_transient_bytes(const ModelSpec& model, const ActivationConfig& c) {
  if (c.cross_entropy != CrossEntropy::Unfused) return Bytes(0);
  return Bytes(rank_logits(model, c) * (8 - element_bytes(c.precision)));
}

}  // namespace paratwin::cost
