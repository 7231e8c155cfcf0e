// Kernel-level work of a transformer layer, embedding, head and optimizer step (its time on a device:
// kernel_time.cpp).
#include "plan/cost/compute.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "plan/cost/eager_rotary.hpp"
#include "plan/cost/fp8_casts.hpp"
#include "plan/cost/fused_attention_rate.hpp"
#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/megatron_eager_ops.hpp"
#include "plan/cost/memory.hpp"
#include "plan/cost/op_checkpoint.hpp"
#include "plan/cost/ring_attention.hpp"

namespace paratwin::cost {

LayerWork layer_work(const TrainingSpec& training, int micro_batch, int tp, int cp, bool sequence_parallel,
                     int ep, bool overlap_tp) {
  LayerWork w{micro_batch,        training.seq_len,   tp, cp, sequence_parallel,
              training.precision, training.attention, ep};
  w.repeat_kv = training.repeat_kv;
  w.cp_attention = training.cp_attention;
  w.cp_rotate = training.cp_rotate;
  w.tp_overlap = training.tp_overlap;
  w.kernels = training.kernels;
  w.projections = training.projections;
  w.rotary = training.rotary;
  w.cross_entropy = training.cross_entropy;
  w.moe_dispatcher = training.moe_dispatcher;
  w.tensor_parallel = training.tensor_parallel;
  w.overlap_tp = overlap_tp;
  w.fp8_recipe = training.fp8_recipe;
  w.fp8_param_gather = training.fp8_param_gather;
  return w;
}

KernelCost launched_as_trained(KernelCost cost, const TrainingSpec& training) {
  cost.synchronous_launches =
      training.launch_blocking ? cost.launches : std::min(cost.host_syncs, cost.launches);
  return cost;
}

namespace {

// One launch of an (M x K) by (K x N) GEMM: 2 M K N FLOPs; reads both operands, writes the result.
// `weight_copies` distinct K x N matrices are read (grouped expert GEMMs read several). `fp8`: under
// fp8 training it runs in fp8 (a transformer layer's linear layers); the output layer and the router
// stay in 16 bits. The passes that quantize its operands are the layer's fp8 casts (fp8_casts.hpp).
KernelCost gemm(double M, double K, double N, double e, double weight_copies = 1, bool fp8 = true) {
  KernelCost c;
  Gemm g{M, N, K, 1, weight_copies};
  g.fp8 = fp8;
  c.gemm_flops = Flops(g.flops());
  c.gemm_bytes = Bytes(g.bytes(e));
  c.gemms.add(g);
  c.launches = 1;
  return c;
}

// One batched launch of attention's per-head products (scores or values): `batch` (M x K) by (K x N)
// products, GEMM FLOPs of their own class.
KernelCost attention_gemm(double batch, double M, double K, double N, double e) {
  KernelCost c;
  const Gemm g{.m = M, .n = N, .k = K, .batch = batch, .attention = true, .fp8 = false};
  c.gemm_flops = c.attention_flops = Flops(g.flops());
  c.gemm_bytes = Bytes(g.bytes(e));
  c.gemms.add(g);
  c.launches = 1;
  return c;
}

// The shapes one rank sees of a micro-batch.
struct Shape {
  Precision precision;
  double e, t, b, sq, sk;  // element bytes, tp, micro-batch, queries (s / cp) and keys (s) per sequence
  double tokens;           // b s / cp: the rows of every GEMM (SP all-gathers before them)
  double sp_tokens;        // rows of norms, dropout and residuals: 1/tp of the tokens with SP
};

Shape shape_of(const LayerWork& w) {
  assert(w.tp >= 1 && w.cp >= 1 && w.micro_batch >= 1 && w.seq_len >= 1 && "bad layer work");
  Shape s;
  s.precision = w.precision;
  s.e = element_bytes(w.precision);
  s.t = w.tp;
  s.b = w.micro_batch;
  s.sq = double(w.seq_len) / w.cp;
  s.sk = w.seq_len;
  s.tokens = s.b * s.sq;
  s.sp_tokens = w.sequence_parallel ? s.tokens / s.t : s.tokens;
  return s;
}

// A norm. Fused (the framework's kernel, or Inductor's under torch.compile; LayerNorm always, as
// nn.LayerNorm is one native kernel) it reads its input and writes its output, at the device's norm
// share of the bandwidth (efficiency.norm). RMSNorm in eager
// PyTorch (training.kernels eager) is ATen's composite rms_norm (aten/src/ATen/native/layer_norm.cpp,
// before PyTorch 2.8's fused kernel): over the input upcast to fp32, pow (reads 4, writes 4), mean
// (reads 4), add and rsqrt over one value a row, the product by the row's factor (4 + 4) and the cast
// back, then the weight's product (e + e): 20 + 2e bytes an element besides the round trip, 8
// launches in bf16, at the device's measured share for that composite (efficiency.eager_norm).
KernelCost norm(const ModelSpec& m, const LayerWork& w, const Shape& s) {
  const double elements = s.sp_tokens * m.hidden;
  if (w.kernels != LayerKernels::Eager || m.norm != NormKind::RmsNorm) return norm_kernel(2 * s.e * elements);
  const double upcast = upcast_round_trip_bytes(s.e);
  return eager_norm_kernels((upcast + 20 + 2 * s.e) * elements, upcast > 0 ? 8 : 6);
}

// What the attention's inputs go through between the QKV projection and the attention kernel. Rotary
// embedding of the queries and keys: fused, one kernel that reads and writes each element; in eager
// PyTorch, and the complex product under torch.compile, the model code's own ops (training.rotary,
// eager_rotary.hpp: runs_eager_rotary); YaRN under Megatron-Core's
// fused modules, its unfused bshd RoPE (megatron_eager_ops.hpp). Then, when the model repeats the key and
// value heads to the query heads before the kernel (training.repeat_kv: torchtitan's repeat_kv, an
// expand then reshape), the keys and values are copied out at the query heads' width.
KernelCost attention_inputs(const ModelSpec& m, const LayerWork& w, const Shape& s) {
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;
  KernelCost c;
  if (m.position == PositionKind::Rope) {
    const double elements = s.tokens * (A + Kv) / s.t;
    if (runs_unfused_megatron_rope(m, w)) {
      c += unfused_megatron_rope(elements, s.e, false);
    } else if (runs_eager_rotary(w)) {
      c += eager_rotary(w.rotary, elements, s.tokens, m.head_dim, s.e, false);
    } else {
      c += memory_bound_kernels(2 * s.e * elements);
    }
  }
  if (w.repeat_kv && m.kv_heads < m.heads) c += memory_bound_kernels(2 * s.e * s.tokens * (Kv + A) / s.t, 2);
  return c;
}

// The MLP's activation over `rows` x f / tp elements: GELU reads and writes each; SwiGLU's SiLU of the
// gate times the up projection reads two and writes one, fused, or runs as two kernels in eager
// PyTorch (F.silu(w1(x)) * w3(x): SiLU reads and writes, the product reads two and writes one). Where
// the gate and up projections are one GEMM (training.projections fused: Megatron-Core's fc1), the
// activation reads its output's two halves in strided rows, at the device's gated share
// (efficiency.gated).
KernelCost activation(const ModelSpec& m, const LayerWork& w, const Shape& s, double rows) {
  const double elements = rows * m.ffn_hidden / s.t;
  if (m.mlp != MlpKind::SwiGlu) return memory_bound_kernels(2 * s.e * elements);
  const bool eager = w.kernels == LayerKernels::Eager;
  const double bytes = (eager ? 5 : 3) * s.e * elements;
  const int launches = eager ? 2 : 1;
  return w.projections == Projections::Fused ? gated_kernels(bytes, launches)
                                             : memory_bound_kernels(bytes, launches);
}

// Bias-dropout-add: reads the branch output and the residual, writes the sum (and a 1-byte mask).
KernelCost residual(const Shape& s, double h, bool dropout) {
  return memory_bound_kernels((3 * s.e + (dropout ? 1 : 0)) * s.sp_tokens * h);
}

}  // namespace

namespace {

// ALiBi over unfused attention as Megatron-DeepSpeed runs it (BLOOM): the scores' GEMM is a baddbmm
// whose input is the heads' bias broadcast over the queries, so PyTorch first writes the bias into the
// whole scores buffer and the GEMM reads it back (beta 1): 2 e bytes a score, forward only (the bias
// takes no gradient). Fused kernels add the bias in their registers (FlashAttention's alibi_slopes):
// nothing here.
KernelCost alibi_bias(const ModelSpec& m, const LayerWork& w) {
  if (m.position != PositionKind::Alibi || w.attention != AttentionKind::Unfused) return {};
  const Shape s = shape_of(w);
  return scores_kernels(2 * s.e * s.b * (m.heads / s.t) * s.sq * s.sk);
}

}  // namespace

double windowed_keys(double queries, double keys, double window) {
  // The rank's queries are the last `queries` of `keys` positions (CP's gather: the sequence's shard
  // among all keys; without CP the whole sequence). A query at position i attends min(i + 1, window).
  const double first = keys - queries;  // position of the rank's first query
  auto prefix = [window](double n) {    // sum of min(i + 1, window) over i < n
    const double ramp = std::min(n, window);
    return ramp * (ramp + 1) / 2 + (n - ramp) * window;
  };
  return prefix(keys) - prefix(first);
}

KernelCost attention_core_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  const double q_heads = m.heads / s.t, d = m.head_dim;
  const double scores = s.b * q_heads * s.sq * s.sk;  // elements of QK^T on this rank
  if (runs_ring_attention(w)) {
    const RingAttention ring = ring_attention(m, w, true);
    KernelCost c = ring.diagonal;
    c += ring.off_diagonal;
    return c;
  }
  if (w.attention != AttentionKind::Unfused) {
    // One kernel; its model FLOPs are the full square (QK^T and softmax(.) V: 2 s_q s_k d per head
    // each), of which a causal mask leaves half to execute, in blocks that skip the masked ones.
    KernelCost c;
    c.gemm_flops = c.attention_flops = Flops(2 * 2 * scores * d);
    c.flash_forward_flops = Flops(2 * scores * d);
    if (w.attention_window > 0 && w.attention_window < s.sk)
      c.flash_forward_flops =
          Flops(2 * 2 * s.b * q_heads * windowed_keys(s.sq, s.sk, w.attention_window) * d);
    c.fused_kernel = w.attention;
    c.fused_head_dim = m.head_dim;
    c.fused_key_length = s.sk;
    c.launches = 1;
    return c;
  }
  // QK^T, a batch of (s_q x d) by (d x s_k) per head; softmax(.) V, (s_q x s_k) by (s_k x d).
  KernelCost c = alibi_bias(m, w);
  c += attention_gemm(s.b * q_heads, s.sq, d, s.sk, s.e);
  c += scores_kernels(2 * s.e * scores);                       // scaled masked softmax
  if (m.dropout) c += scores_kernels((2 * s.e + 1) * scores);  // attention dropout
  c += attention_gemm(s.b * q_heads, s.sq, s.sk, d, s.e);
  return c;
}

namespace {

// The memory-bound kernels of Megatron-Core's token dispatchers around the experts: permute (each
// token's top_k copies gathered in expert order) and unpermute (the copies weighted by their router
// probabilities and summed back into tokens), each reading and writing the k copies of the rank's
// tokens. The all-to-all dispatcher (training.moe_dispatcher alltoall) under ep > 1 with several
// experts per rank also sorts the received rows, which arrive grouped by source rank, by local expert
// before the experts and back after them (sort_chunks_by_idxs): two more passes over the `rows` the
// rank runs. Each pass reads and writes every row once, forward and backward alike.
KernelCost moe_dispatch_kernels(const ModelSpec& m, const LayerWork& w, const Shape& s, double rows) {
  const double h = m.hidden;
  KernelCost c = memory_bound_kernels(2 * 2 * s.e * m.moe->top_k * s.tokens * h, 2);
  if (w.moe_dispatcher == MoeDispatcher::AllToAll && w.ep > 1 && m.moe->experts / w.ep > 1)
    c += memory_bound_kernels(2 * 2 * s.e * rows * h, 2);
  return c;
}

// The experts' output bias of an MoE layer with biases (megatron_eager_ops.hpp), under Megatron-Core's
// fused modules only: eager runs count their bias gradients in eager_autograd_backward.
KernelCost expert_bias(const ModelSpec& m, const LayerWork& w, const Shape& s, double rows, bool backward) {
  if (!m.bias || w.kernels != LayerKernels::Fused) return {};
  return moe_expert_bias(rows, m.hidden, m.moe->experts / w.ep, s.e, backward);
}

// The shape an MLP's kernels see: the layer's, but for folded experts (folds_experts): the router and
// dispatcher on the rank's sequence-parallel share of the tokens, the experts split expert_tp-way
// (Megatron-Core's all-to-all dispatcher with MoE parallel folding, token_dispatcher.py; expert_tp 1).
Shape mlp_shape(const LayerWork& w, const Shape& s, bool moe_layer) {
  if (!moe_layer || !folds_experts(w)) return s;
  Shape x = s;
  x.t = w.expert_tp;
  x.tokens = s.sp_tokens * w.expert_tp;
  return x;
}

// The rows an MLP's GEMMs run on this rank and the distinct weight matrices they read: the tokens and
// one matrix for a dense layer; an MoE layer's top_k copies of each token at the hottest rank's pace,
// over this rank's experts.
std::pair<double, double> mlp_rows(const ModelSpec& m, const LayerWork& w, const Shape& s, bool moe_layer) {
  if (!moe_layer) return {s.tokens, 1};
  assert(m.moe && "an MoE layer in a model without moe");
  const double rows = m.moe->top_k * s.tokens * w.expert_load;
  return {rows, std::min(m.moe->experts / double(w.ep), rows)};
}

// What per-operator selective checkpointing runs again (op_checkpoint.hpp; the kept outputs are
// cost::layer_activation_bytes'): the linears whose output it does not keep but the last (K, the output
// projection and SwiGLU's up projection, separate; the output projection, fused), and every memory-bound
// kernel (norms, rotary embedding, activation, residual adds, MoE permutation); unfused attention's
// batched matmuls and softmax too. Fused attention's output and the router's are kept.
KernelCost op_recompute_forward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const Shape s = shape_of(w);
  KernelCost c = norm(m, w, s) * 2;
  c += residual(s, m.hidden, m.dropout) * 2;
  c += attention_inputs(m, w, s);
  if (w.attention == AttentionKind::Unfused) c += attention_core_forward(m, w);
  const Shape sm = mlp_shape(w, s, moe_layer);
  const auto [rows, experts_read] = mlp_rows(m, w, sm, moe_layer);
  const std::vector<LayerLinear> linears = layer_linears(m.mlp, w.projections);
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!op_recomputes(i, linears.size())) continue;
    const LinearWidths width = linear_widths(m, linears[i]);
    const bool mlp = mlp_linear(linears[i]);
    const double t = mlp ? sm.t : s.t, m_rows = mlp ? rows : s.tokens, copies = mlp ? experts_read : 1;
    c += row_parallel(linears[i]) ? gemm(m_rows, width.in / t, width.out, s.e, copies)
                                  : gemm(m_rows, width.in, width.out / t, s.e, copies);
  }
  if (moe_layer) c += moe_dispatch_kernels(m, w, sm, rows);
  c += activation(m, w, sm, rows);
  c += fp8_casts_forward(fp8_op_recompute_linears(m, w, moe_layer), w);
  // The two all-gathers run again (their outputs are not kept; lowering repeats them).
  c += sequence_shard_copies(m, w, 2, 0);
  return c;
}

// Megatron-Core's selective recomputation of `modules`: the attention core (its CheckpointFunction),
// and in an MoE layer the pre-MLP norm, a module of its own beside the router (Transformer Engine fuses
// every other norm into the next linear, which keeps its output), and the experts' activation over
// their rows (CheckpointWithoutOutput).
KernelCost selective_recompute_forward(const ModelSpec& m, const LayerWork& w, bool moe_layer,
                                       const RecomputeModules& modules) {
  KernelCost c;
  if (modules.core_attn) c += attention_core_forward(m, w);
  if (!moe_layer) return c;
  const Shape s = shape_of(w);
  if (modules.layernorm) c += norm(m, w, s);
  const Shape sm = mlp_shape(w, s, true);
  if (modules.moe_act) c += activation(m, w, sm, mlp_rows(m, w, sm, true).first);
  return c;
}

}  // namespace

KernelCost recompute_forward(const ModelSpec& m, const LayerWork& w, Recompute mode, bool moe_layer,
                             const RecomputeModules& modules) {
  switch (mode) {
    case Recompute::Full:
      return layer_forward(m, w, moe_layer);
    case Recompute::Op:
      return op_recompute_forward(m, w, moe_layer);
    case Recompute::Selective:
      return selective_recompute_forward(m, w, moe_layer, modules);
    default:
      return {};
  }
}

LayerRows layer_rows(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const Shape s = shape_of(w), sm = mlp_shape(w, s, moe_layer);
  const auto [rows, experts_read] = mlp_rows(m, w, sm, moe_layer);
  return {s.tokens, s.sp_tokens, rows, experts_read, sm.t};
}

KernelCost sequence_shard_copies(const ModelSpec& m, const LayerWork& w, int all_gathers,
                                 int reduce_scatters) {
  if (w.tensor_parallel != TensorParallelImpl::DTensor || !w.sequence_parallel || w.tp < 2 || w.overlap_tp)
    return {};
  const LayerCollectiveBytes bytes = layer_collective_bytes(m, w);
  return memory_bound_kernels(
      2 * (all_gathers * bytes.tp_gather.value() + reduce_scatters * bytes.tp.value()),
      all_gathers + reduce_scatters);
}

namespace {

// A layer's forward kernels but for its fp8 casts, whose backward is not their forward's traffic twice.
KernelCost layer_forward_kernels(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const Shape s = shape_of(w);
  const double h = m.hidden, f = m.ffn_hidden;
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;

  // Attention: norm, QKV projection (column-parallel), rotary embedding, core, output projection
  // (row-parallel), bias-dropout-add.
  KernelCost c = norm(m, w, s);
  c += gemm(s.tokens, h, (A + 2 * Kv) / s.t, s.e, 1);
  c += attention_inputs(m, w, s);
  c += attention_core_forward(m, w);
  c += gemm(s.tokens, A / s.t, h, s.e, 1);
  c += residual(s, h, m.dropout);

  // MLP: norm, up projection (gate and up for SwiGLU), activation, down projection, bias-dropout-add.
  // An MoE layer routes each token to top_k experts: router GEMM and top-k, permutation into the
  // experts' grouped GEMMs and back, which read the weights of every expert that got tokens.
  c += norm(m, w, s);
  const Shape sm = mlp_shape(w, s, moe_layer);
  const auto [rows, experts_read] = mlp_rows(m, w, sm, moe_layer);
  if (moe_layer) {
    const double E = m.moe->experts;
    c += gemm(sm.tokens, h, E / sm.t, s.e, 1, false);  // router (split like the rest, so FLOPs add up)
    c += memory_bound_kernels(2 * 4 * sm.tokens * E);  // fp32 softmax and top-k
    c += moe_dispatch_kernels(m, w, sm, rows);
    // The dispatcher copies the token counts per expert to the host, which passes them as the
    // all-to-all's split sizes and the grouped GEMM's row splits: the host waits for the device once.
    c.host_syncs += 1;
  }
  const double gates = m.mlp == MlpKind::SwiGlu ? 2 : 1;
  c += gemm(rows, h, gates * f / sm.t, s.e, experts_read);
  c += activation(m, w, sm, rows);
  c += gemm(rows, f / sm.t, h, s.e, experts_read);
  if (moe_layer) c += expert_bias(m, w, sm, rows, false);
  c += residual(s, h, m.dropout);
  c += sequence_shard_copies(m, w, 2, 2);
  return c;
}

// The backward of a forward's kernels: each GEMM C = A B (m x k by k x n) becomes dA = dC B^T
// (m x n by n x k) and dB = A^T dC (k x m by m x n); fused attention runs its backward kernel (2.5x
// the forward's FLOPs: it recomputes the scores); each memory-bound kernel reads what the forward read
// plus the incoming gradient and writes the outgoing one: about twice the forward's traffic.
KernelCost backward_of(const KernelCost& f) {
  KernelCost b;
  b.gemm_flops = f.gemm_flops * 2;
  b.attention_flops = f.attention_flops * 2;
  b.gemm_bytes = f.gemm_bytes * 2;
  for (Gemm g : f.gemms) {
    const Gemm forward = g;
    g.n = forward.k, g.k = forward.n;  // input gradient
    b.gemms.add(g);
    g.m = forward.k, g.n = forward.n, g.k = forward.m;  // weight gradient: one per weight copy
    g.copies_are_results = forward.weight_copies > 1;
    b.gemms.add(g);
  }
  b.flash_backward_flops = f.flash_forward_flops * 2.5;
  b.flash_full_backward_flops = f.flash_full_forward_flops * 2.5;
  b.fused_kernel = f.fused_kernel;
  b.fused_head_dim = f.fused_head_dim;
  b.fused_key_length = f.fused_key_length;
  for (const MemoryBoundKind& k : kMemoryBoundKinds) b.*k.bytes = f.*k.bytes * 2;
  b.launches = f.launches * 2;
  return b;
}

}  // namespace

KernelCost eager_autograd_backward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  if (w.kernels != LayerKernels::Eager) return {};
  const Shape s = shape_of(w);
  const double h = m.hidden, f = m.ffn_hidden;
  const double qkv = (double(m.heads) * m.head_dim + 2.0 * m.kv_heads * m.head_dim) / s.t;
  const bool swiglu = m.mlp == MlpKind::SwiGlu;
  // Each residual stream feeds its norm and its residual add: two gradient sums a layer.
  KernelCost c = memory_bound_kernels(3 * s.e * 2 * s.sp_tokens * h, 2);
  if (w.projections == Projections::Fused) {
    c += memory_bound_kernels(2 * s.e * s.tokens * qkv);  // cat of dq, dk, dv
  } else {
    // The norms' outputs feed the query, key and value linears (two sums), and under SwiGLU the gate
    // and up linears (one more): autograd sums their input gradients.
    const int sums = swiglu ? 3 : 2;
    c += memory_bound_kernels(3 * s.e * sums * s.tokens * h, sums);
  }
  if (m.bias) {
    // The row-parallel linears' biases are added to the whole output (after the TP reduction): h wide.
    const Shape sm = mlp_shape(w, s, moe_layer);
    const double rows = mlp_rows(m, w, sm, moe_layer).first;
    const double gates = swiglu ? 2 : 1;
    c += memory_bound_kernels(s.e * (s.tokens * (qkv + h) + rows * (gates * f / sm.t + h)), 4);
  }
  return c;
}

KernelCost layer_forward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  KernelCost c = layer_forward_kernels(m, w, moe_layer);
  c += fp8_casts_forward(fp8_linears(m, w, moe_layer), w);
  return c;
}

KernelCost layer_backward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const Shape s = shape_of(w);
  KernelCost c = backward_of(layer_forward_kernels(m, w, moe_layer));
  c += fp8_casts_backward(fp8_linears(m, w, moe_layer), w);
  c += eager_autograd_backward(m, w, moe_layer);
  // Kernels whose backward is not their forward's traffic twice: backward_of's count of their forward
  // out, their own backward in.
  auto own_backward = [&c](const KernelCost& forward, const KernelCost& backward) {
    c = without(c, backward_of(forward));
    c += backward;
  };
  if (const KernelCost bias = alibi_bias(m, w); bias.launches > 0) c = without(c, backward_of(bias));
  // The backward's collectives copy as the forward's did: four copies, not backward_of's eight. Its
  // scatters (the gathers' gradients) move 16 bits, its gathers (the scatters' gradients) what the
  // forward's gathers move: torchao's Float8RowwiseParallel casts the output gradient to float8
  // before the all-gather that is its reduce-scatter's backward.
  c = without(c, sequence_shard_copies(m, w, 2, 2));
  if (w.overlap_tp && w.tp_overlap == TpOverlap::AsyncTp) {
    // AsyncTP fuses neither of the backward's reduce-scatters (the QKV and up projections' input
    // gradients, plan/cost/tp_overlap.hpp): they rearrange their input as without TP overlap.
    LayerWork unfused = w;
    unfused.overlap_tp = false;
    c += sequence_shard_copies(m, unfused, 0, 2);
  }
  const double rotated = s.tokens * (double(m.heads) + m.kv_heads) * m.head_dim / s.t;  // queries and keys
  if (runs_unfused_megatron_rope(m, w))
    own_backward(unfused_megatron_rope(rotated, s.e, false), unfused_megatron_rope(rotated, s.e, true));
  if (eager_rotary_has_own_backward(m, w))
    own_backward(eager_rotary(w.rotary, rotated, s.tokens, m.head_dim, s.e, false),
                 eager_rotary(w.rotary, rotated, s.tokens, m.head_dim, s.e, true));
  // A permutation's backward is the inverse permutation of the gradients: its forward's traffic once,
  // where backward_of counts every memory-bound kernel twice. The experts' bias loop has a backward of
  // its own.
  if (moe_layer) {
    const Shape sm = mlp_shape(w, s, true);
    const double rows = mlp_rows(m, w, sm, true).first;
    c = without(c, moe_dispatch_kernels(m, w, sm, rows));
    own_backward(expert_bias(m, w, sm, rows, false), expert_bias(m, w, sm, rows, true));
  }
  if (!runs_ring_attention(w)) return c;
  // The ring's backward is not its forward's traffic twice: its own kernels (ring_attention.cpp).
  c = without(c, backward_of(attention_core_forward(m, w)));
  const RingAttention ring = ring_attention(m, w, false);
  c += ring.diagonal;
  c += ring.off_diagonal;
  return c;
}

KernelCost embedding_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  const double h = m.hidden;
  // Vocabulary-parallel lookup: each rank gathers its rows into a full b s h output (then reduced).
  KernelCost c = memory_bound_kernels(2 * s.e * s.tokens * h);
  if (m.position == PositionKind::Learned)
    c += memory_bound_kernels(3 * s.e * s.sp_tokens * h);  // + positions
  if (m.dropout) c += memory_bound_kernels((2 * s.e + 1) * s.sp_tokens * h);
  return c;
}

// The dense gradient: aten's embedding_dense_backward_cuda allocates it with at::zeros before summing
// the rows in. Megatron-Core's DistributedDataParallel _make_backward_post_hook then runs
// param.main_grad.add_(param.grad) for every parameter whose GEMM did not accumulate it itself
// (grad_added_to_main_grad, set by the linears' gradient_accumulation_fusion; a lookup cannot).
KernelCost embedding_backward(const ModelSpec& m, const LayerWork& w, double gradient_buffer_bytes) {
  const Shape s = shape_of(w);
  const double table = double(m.vocab) * m.hidden / s.t;
  KernelCost c = embedding_forward(m, w);
  c += memory_bound_kernels(s.e * table);
  if (gradient_buffer_bytes > 0) c += memory_bound_kernels((2 * gradient_buffer_bytes + s.e) * table);
  return c;
}

namespace {

// The final norm and the vocabulary-parallel logits: 2 b s h V / tp.
KernelCost logits_forward(const ModelSpec& m, const LayerWork& w, const Shape& s) {
  KernelCost c = norm(m, w, s);
  c += gemm(s.tokens, m.hidden, m.vocab / s.t, s.e, 1, false);
  return c;
}

// Cross-entropy in fp32 over the rank's logits (b s V / tp elements). unfused, PyTorch's
// F.cross_entropy: forward the upcast (e + 4), the softmax's max, sum and output passes (3 x 4 + 4);
// backward the one-hot gradient (4), the softmax backward (reads the gradient twice and the softmax,
// writes: 16), the cast back (4 + e). vocab_parallel, Megatron-LM's _VocabParallelCrossEntropy
// (tensor_parallel/cross_entropy.py: calculate_logits_max, calculate_predicted_logits,
// calculate_cross_entropy_loss, calculate_gradients): `.float()` (e + 4), torch.max (4), the in-place
// subtraction (4 + 4), exp in place (4 + 4), its sum (4), the in-place division into the saved softmax
// (4 + 4), and 12 small kernels on b s values (target mask and shift, the target logit, log); backward
// the one-hot subtraction by index_put on b s values (6 small kernels), grad_input.mul_ (4 + 4) and the
// cast back (4 + e). Liger-Kernel's H100 table measures it at 59 bytes a logit at the triad rate. Rows
// of tens of thousands of fp32 values do not stay on chip between passes: each is HBM traffic. A fused
// kernel (flash-attn's Triton cross_entropy_fwd/bwd_kernel, Transformer Engine's online_softmax_kernel
// and cross_entropy_backward_kernel) reads each row in blocks, keeping the running max and sum in
// registers: forward reads the logit (e), backward reads it and writes its gradient (2 e).
KernelCost cross_entropy(const ModelSpec& m, const Shape& s, CrossEntropy kind, bool backward) {
  const double logits = s.tokens * m.vocab / s.t;
  switch (kind) {
    case CrossEntropy::Fused:
      return memory_bound_kernels((backward ? 2 : 1) * s.e * logits);
    case CrossEntropy::VocabParallel: {
      const double cast = s.e < 4 ? s.e + 4 : 0;  // .float() and its backward: no copy in fp32
      return backward ? memory_bound_kernels((4 + 4 + cast) * logits, 2 + 6)
                      : memory_bound_kernels((cast + 4 + 2 * 4 + 2 * 4 + 4 + 2 * 4) * logits, 6 + 12);
    }
    case CrossEntropy::Unfused:
      break;
  }
  return memory_bound_kernels((backward ? 4 + 16 + 4 + s.e : s.e + 4 + 3 * 4 + 4) * logits, 4);
}

}  // namespace

KernelCost head_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  KernelCost c = logits_forward(m, w, s);
  c += cross_entropy(m, s, w.cross_entropy, false);
  return c;
}

KernelCost head_backward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  KernelCost c = backward_of(logits_forward(m, w, s));
  c += cross_entropy(m, s, w.cross_entropy, true);
  return c;
}

KernelCost gradient_copy(GradAccumulation mode, double parameters, double element, double buffer,
                         int tensors) {
  switch (mode) {
    case GradAccumulation::Copy:
      return memory_bound_kernels((element + buffer + 3 * buffer) * parameters, 2 * tensors);
    case GradAccumulation::Unfused:
      return memory_bound_kernels((element + 2 * buffer) * parameters, tensors);
    case GradAccumulation::InPlace:
      break;
  }
  return {};
}

int parameter_tensors_per_layer(const ModelSpec& m, Projections projections) {
  const bool fused = projections == Projections::Fused;
  const int attention = (fused ? 1 : 3) + 1;
  const int mlp = m.mlp == MlpKind::SwiGlu ? (fused ? 2 : 3) : 2;
  const int linears = attention + mlp;
  const int norms = 2 * (m.norm == NormKind::LayerNorm ? 2 : 1);
  return linears * (m.bias ? 2 : 1) + norms;
}

KernelCost gradient_buffer_zeroing(double parameters, double gradient_buffer_bytes) {
  KernelCost c;
  if (gradient_buffer_bytes <= 0) return c;
  c.optimizer_bytes = Bytes(gradient_buffer_bytes * parameters);
  c.launches = 1;
  return c;
}

KernelCost optimizer_step(double parameters, const TrainingSpec& training) {
  // Gradient clipping first reads every gradient for the global norm (its own multi-tensor kernel;
  // Megatron-LM, DeepSpeed, FSDP's clip_grad_norm_ and the live engines all clip by default). The
  // update then reads and writes every optimizer-state byte (mixed precision: fp32 master and
  // moments; fp32: the weights and moments), reads the gradient, and under mixed precision writes the
  // new 16-bit copy. AdamW: 2 + 2 x 12 + 2 + 2 = 30 bytes per parameter in bf16 (34 with fp32
  // gradients), 4 + 2 x (8 + 4) + 4 = 32 in fp32.
  const double e = element_bytes(training.precision), g = gradient_bytes(training);
  const double K = optimizer_bytes_per_parameter(training.optimizer, training.precision);
  const bool mixed = e < 4;
  const double state = K + (mixed ? 0 : 4);
  KernelCost c;
  c.optimizer_bytes = Bytes(parameters * (g + 2 * state + g + (mixed ? e : 0)));
  c.launches = 2;
  // fp16 trains under dynamic loss scaling (Megatron-LM's and DeepSpeed's default): before the step the
  // gradients are unscaled and checked for inf/NaN in one pass that reads and writes each
  // (Megatron-LM's _amp_foreach_non_finite_check_and_unscale_ over its main grads; DeepSpeed's ZeRO
  // unscale over the partition). The overflow flag's all-reduce is a few bytes: left out.
  if (training.precision == Precision::Fp16) {
    c.optimizer_bytes += Bytes(parameters * 2 * g);
    c.launches += 1;
  }
  return c;
}

}  // namespace paratwin::cost
