// Kernel-level work of a transformer layer, embedding, head and optimizer step, and its roofline time.
#include "plan/cost/compute.hpp"

#include <algorithm>
#include <cassert>

#include "plan/cost/memory.hpp"

namespace paratwin::cost {

KernelCost& KernelCost::operator+=(const KernelCost& o) {
  gemm_flops += o.gemm_flops;
  attention_flops += o.attention_flops;
  gemm_bytes += o.gemm_bytes;
  elementwise_bytes += o.elementwise_bytes;
  optimizer_bytes += o.optimizer_bytes;
  launches += o.launches;
  return *this;
}

KernelCost KernelCost::operator*(int k) const {
  return {gemm_flops * k,        attention_flops * k, gemm_bytes * k,
          elementwise_bytes * k, optimizer_bytes * k, launches * k};
}

namespace {

// The terms of the roofline that add up in any case: GEMMs at their compute rates, memory-bound
// kernels at theirs, launches.
struct Rates {
  Seconds gemm_math, gemm_memory, rest;
};

Rates rates(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  const auto peak = device.peak.find(precision);
  assert(peak != device.peak.end() && peak->second.value() > 0 && "device has no peak at this precision");
  const EfficiencySpec& e = device.efficiency;
  const BytesPerSecond memory = device.memory_bandwidth * e.memory;
  return {(cost.gemm_flops - cost.attention_flops) / (peak->second * e.gemm) +
              cost.attention_flops / (peak->second * e.attention_or_gemm()),
          cost.gemm_bytes / memory,
          cost.elementwise_bytes / memory +
              cost.optimizer_bytes / (device.memory_bandwidth * e.optimizer_or_memory()) +
              e.kernel_launch * cost.launches};
}

}  // namespace

Seconds compute_time(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  const Rates r = rates(cost, device, precision);
  return std::max(r.gemm_math, r.gemm_memory) + r.rest;
}

Seconds compute_time_bound(const KernelCost& cost, const DeviceSpec& device, Precision precision) {
  const Rates r = rates(cost, device, precision);
  return r.gemm_math + r.rest;
}

namespace {

// One launch of an (M x K) by (K x N) GEMM: 2 M K N FLOPs; reads both operands, writes the result.
// `weight_copies` distinct K x N matrices are read (grouped expert GEMMs read several).
KernelCost gemm(double M, double K, double N, double e, double weight_copies = 1) {
  KernelCost c;
  c.gemm_flops = Flops(2 * M * K * N);
  c.gemm_bytes = Bytes(e * (M * K + weight_copies * K * N + M * N));
  c.launches = 1;
  return c;
}

KernelCost elementwise(double bytes, int launches = 1) {
  KernelCost c;
  c.elementwise_bytes = Bytes(bytes);
  c.launches = launches;
  return c;
}

// A batch of attention's per-head products (scores or values): GEMM FLOPs of their own class.
KernelCost attention_gemm(double flops, double bytes) {
  KernelCost c;
  c.gemm_flops = c.attention_flops = Flops(flops);
  c.gemm_bytes = Bytes(bytes);
  c.launches = 1;
  return c;
}

// The shapes one rank sees of a micro-batch.
struct Shape {
  double e, t, b, sq, sk;  // element bytes, tp, micro-batch, queries (s / cp) and keys (s) per sequence
  double tokens;           // b s / cp: the rows of every GEMM (SP all-gathers before them)
  double sp_tokens;        // rows of norms, dropout and residuals: 1/tp of the tokens with SP
};

Shape shape_of(const LayerWork& w) {
  assert(w.tp >= 1 && w.cp >= 1 && w.micro_batch >= 1 && w.seq_len >= 1 && "bad layer work");
  Shape s;
  s.e = element_bytes(w.precision);
  s.t = w.tp;
  s.b = w.micro_batch;
  s.sq = double(w.seq_len) / w.cp;
  s.sk = w.seq_len;
  s.tokens = s.b * s.sq;
  s.sp_tokens = w.sequence_parallel ? s.tokens / s.t : s.tokens;
  return s;
}

// A norm reads its input and writes its output.
KernelCost norm(const Shape& s, double h) {
  return elementwise(2 * s.e * s.sp_tokens * h);
}

// Bias-dropout-add: reads the branch output and the residual, writes the sum (and a 1-byte mask).
KernelCost residual(const Shape& s, double h, bool dropout) {
  return elementwise((3 * s.e + (dropout ? 1 : 0)) * s.sp_tokens * h);
}

}  // namespace

KernelCost attention_core_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  const double q_heads = m.heads / s.t, kv_heads = m.kv_heads / s.t, d = m.head_dim;
  const double scores = s.b * q_heads * s.sq * s.sk;  // elements of QK^T on this rank
  // QK^T and softmax(.) V: 2 s_q s_k d FLOPs per head each; K and V are read once per kv head (GQA).
  const double flops = 2 * scores * d;
  const double q_bytes = s.e * s.b * q_heads * s.sq * d, kv_bytes = s.e * s.b * kv_heads * s.sk * d;
  KernelCost c = attention_gemm(flops, q_bytes + kv_bytes + s.e * scores);  // QK^T
  c += elementwise(2 * s.e * scores);                                       // scaled masked softmax
  if (m.dropout) c += elementwise((2 * s.e + 1) * scores);                  // attention dropout
  c += attention_gemm(flops, s.e * scores + kv_bytes + q_bytes);            // (.) V
  return c;
}

KernelCost layer_forward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const Shape s = shape_of(w);
  const double h = m.hidden, f = m.ffn_hidden;
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;

  // Attention: norm, QKV projection (column-parallel), rotary embedding, core, output projection
  // (row-parallel), bias-dropout-add.
  KernelCost c = norm(s, h);
  c += gemm(s.tokens, h, (A + 2 * Kv) / s.t, s.e);
  if (m.position == PositionKind::Rope) c += elementwise(2 * s.e * s.tokens * (A + Kv) / s.t);
  c += attention_core_forward(m, w);
  c += gemm(s.tokens, A / s.t, h, s.e);
  c += residual(s, h, m.dropout);

  // MLP: norm, up projection (gate and up for SwiGLU), activation, down projection, bias-dropout-add.
  // An MoE layer routes each token to top_k experts: router GEMM and top-k, permutation into the
  // experts' grouped GEMMs and back, which read the weights of every expert that got tokens.
  c += norm(s, h);
  double rows = s.tokens, experts_read = 1;
  if (moe_layer) {
    assert(m.moe && "an MoE layer in a model without moe");
    const double k = m.moe->top_k, E = m.moe->experts;
    c += gemm(s.tokens, h, E / s.t, s.e);    // router (split by tp like the rest, so FLOPs add up)
    c += elementwise(2 * 4 * s.tokens * E);  // fp32 softmax and top-k
    c += elementwise(2 * 2 * s.e * k * s.tokens * h, 2);  // permute and unpermute: read and write k copies
    rows = k * s.tokens;
    experts_read = std::min(E, rows);
  }
  const double gates = m.mlp == MlpKind::SwiGlu ? 2 : 1;
  c += gemm(rows, h, gates * f / s.t, s.e, experts_read);
  c += elementwise((gates + 1) * s.e * rows * f / s.t);  // GELU: read, write; SwiGLU: read 2, write 1
  c += gemm(rows, f / s.t, h, s.e, experts_read);
  c += residual(s, h, m.dropout);
  return c;
}

KernelCost layer_backward(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  // Each GEMM becomes two (input and weight gradients); each elementwise kernel reads what the forward
  // read plus the incoming gradient and writes the outgoing one: about twice the forward's traffic.
  return layer_forward(m, w, moe_layer) * 2;
}

KernelCost embedding_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  const double h = m.hidden;
  // Vocabulary-parallel lookup: each rank gathers its rows into a full b s h output (then reduced).
  KernelCost c = elementwise(2 * s.e * s.tokens * h);
  if (m.position == PositionKind::Learned) c += elementwise(3 * s.e * s.sp_tokens * h);  // + positions
  if (m.dropout) c += elementwise((2 * s.e + 1) * s.sp_tokens * h);
  return c;
}

KernelCost head_forward(const ModelSpec& m, const LayerWork& w) {
  const Shape s = shape_of(w);
  const double h = m.hidden, V = m.vocab;
  KernelCost c = norm(s, h);
  c += gemm(s.tokens, h, V / s.t, s.e);  // vocabulary-parallel logits: 2 b s h V / tp
  // Cross-entropy reads the logits and keeps an fp32 softmax for the backward.
  c += elementwise((s.e + 4) * s.tokens * V / s.t);
  return c;
}

KernelCost head_backward(const ModelSpec& m, const LayerWork& w) {
  return head_forward(m, w) * 2;
}

KernelCost optimizer_step(double parameters, OptimizerKind optimizer, Precision precision) {
  // Reads and writes every optimizer-state byte (mixed precision: fp32 master and moments; fp32: the
  // weights and moments), reads the gradient, and under mixed precision writes the new 16-bit copy.
  // AdamW: 2 x 12 + 2 + 2 = 28 bytes per parameter in bf16, 2 x (8 + 4) + 4 = 28 in fp32.
  const double e = element_bytes(precision), K = optimizer_bytes_per_parameter(optimizer, precision);
  const bool mixed = e < 4;
  const double state = K + (mixed ? 0 : 4);
  KernelCost c;  // one fused multi-tensor kernel
  c.optimizer_bytes = Bytes(parameters * (2 * state + e + (mixed ? e : 0)));
  c.launches = 1;
  return c;
}

}  // namespace paratwin::cost
