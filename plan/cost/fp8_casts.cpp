// fp8 training's quantization passes around the linear layers' GEMMs, per recipe. Each pass is a
// memory-bound kernel: its bytes (16-bit elements read, 1-byte fp8 elements written) and its launch.
#include "plan/cost/fp8_casts.hpp"

#include <algorithm>

#include "plan/cost/memory.hpp"
#include "plan/cost/op_checkpoint.hpp"

namespace paratwin::cost {

namespace {

constexpr double kFp8 = 1;  // bytes of an fp8 element

void add(KernelCost& c, double bytes, int launches) {
  c.elementwise_bytes += Bytes(bytes);
  c.launches += launches;
}

bool under_fp8(const LayerWork& w) {
  return w.precision == Precision::Fp8;
}

// Transformer Engine (module/linear.py and layernorm_linear.py, _Linear and _LayerNormLinear forward
// and backward; transformer_engine/pytorch/csrc/extensions/normalization.cpp and cast.cpp). Without
// sequence parallelism a Linear quantizes its input with fp8_cast_transpose_fused: reads it, writes
// fp8 and its transpose (the weight gradient's operand) in one kernel. Under sequence parallelism it
// only casts (before the column-parallel all-gather), and the backward transposes the gathered fp8
// input (tex.fp8_transpose). A LayerNormLinear's norm quantizes its own output: under delayed scaling
// the norm kernel writes fp8 in place of 16 bits (one byte an element less than the norm costed in
// compute.cpp) and the backward transposes it; under current scaling it writes 16 bits with their
// amax and a cast follows as for a Linear (FUSED_NORM_AMAX_FP8). Current scaling first reads a tensor for its
// amax (nvte_compute_amax) where no kernel before it computed one.
void te_input(const Fp8Linear& l, const LayerWork& w, KernelCost& fwd, KernelCost& bwd) {
  const double e = element_bytes(w.precision);
  const bool sp = w.sequence_parallel && w.tp > 1;
  const bool delayed = w.fp8_recipe == Fp8Recipe::TeDelayed;
  if (l.input == Fp8Input::Norm && delayed) {
    add(fwd, -(e - kFp8) * l.cast_rows * l.k, 0);
    add(bwd, 2 * kFp8 * l.rows * l.k, 1);
    return;
  }
  if (!delayed && l.input != Fp8Input::Norm) add(fwd, e * l.cast_rows * l.k, 1);  // amax
  // Under SP the cast comes before the all-gather and the backward transposes the gathered input.
  if (sp) {
    add(fwd, (e + kFp8) * l.cast_rows * l.k, 1);
    add(bwd, 2 * kFp8 * l.rows * l.k, 1);
  } else {
    add(fwd, (e + 2 * kFp8) * l.rows * l.k, 1);
  }
}

// Transformer Engine's output gradient (grad_output_preprocess): fp8_cast_transpose_bgrad_fused reads
// it and writes fp8 and its transpose, the bias gradient reduced in the same kernel; current scaling
// reads it once more for its amax first.
void te_grad_output(const Fp8Linear& l, const LayerWork& w, KernelCost& bwd) {
  const double e = element_bytes(w.precision);
  if (w.fp8_recipe == Fp8Recipe::TeCurrent) add(bwd, e * l.rows * l.n, 1);
  add(bwd, (e + 2 * kFp8) * l.rows * l.n, 1);
}

// torchao's Float8Linear with dynamic tensorwise scaling (torchao/float8/float8_linear.py,
// float8_scaling_utils.hp_tensor_to_float8_dynamic, float8_ops.preprocess_addmm): each tensor's amax
// (a reduction in two stages, the second over a few values), then its cast; torch._scaled_mm takes a
// row-major first and a column-major second operand, so the weight gradient's operands (the input and
// the output gradient, transposed) and the input gradient's (the weight, transposed) are copied to
// the other layout. Under torch.compile (training.kernels compiled, or fused) Inductor fuses the amax into
// the kernel that produced the tensor when it generated that kernel (a norm, an activation, the backward's
// elementwise kernels; not the attention kernel) and writes both layouts from one cast, as torchao's
// roofline model counts them (torchao/float8/roofline_utils.py, get_tensor_memory_traffic_ovhd_s,
// tensorwise); eager, each is a kernel of its own. A column-parallel linear under torchtitan's
// sequence-parallel plan (Float8ColwiseParallel) casts its input before the all-gather, so the
// transposed copy of the gathered input is made in the backward.
void torchao_tensor(double cast_rows, double rows, double cols, bool producer_fuses, const LayerWork& w,
                    KernelCost& cast_pass, KernelCost& bwd) {
  const double e = element_bytes(w.precision);
  const bool compiled = w.kernels != LayerKernels::Eager;
  const bool gathered = cast_rows < rows;
  // The amax: its first stage a pass of its own unless fused; its second, over a few values, a launch.
  if (compiled && producer_fuses)
    add(cast_pass, 0, 1);
  else
    add(cast_pass, e * cast_rows * cols, 2);
  if (compiled && !gathered) {
    add(cast_pass, (e + 2 * kFp8) * rows * cols, 1);
    return;
  }
  add(cast_pass, (e + kFp8) * cast_rows * cols, 1);
  add(bwd, 2 * kFp8 * rows * cols, 1);
}

// torchao's weight: without the fp8 all-gather, cast every micro-batch from its 16-bit copy, amax and
// cast in the forward, cast again in the backward for the input gradient (roofline_utils, tensorwise
// weight: kernels 1, 3 and 4). With it (float8.enable_fsdp_float8_all_gather, fsdp_utils'
// WeightWithDynamicFloat8CastTensor) FSDP gathers the fp8 weight (the shard's cast, 1/dp of the weight,
// is not costed), and the input gradient copies it to the column-major layout.
void torchao_weight(const Fp8Linear& l, const LayerWork& w, KernelCost& fwd, KernelCost& bwd) {
  const double e = element_bytes(w.precision);
  const double elements = l.k * l.n * l.weight_copies;
  if (w.fp8_param_gather) {
    add(bwd, 2 * kFp8 * elements, 1);
    return;
  }
  add(fwd, e * elements, 2);
  add(fwd, (e + kFp8) * elements, 1);
  add(bwd, (e + kFp8) * elements, 1);
}

void torchao_linear(const Fp8Linear& l, const LayerWork& w, KernelCost& fwd, KernelCost& bwd) {
  torchao_tensor(l.cast_rows, l.rows, l.k, l.input != Fp8Input::Other, w, fwd, bwd);
  torchao_weight(l, w, fwd, bwd);
  // The output gradient comes out of the backward's elementwise kernels (residual adds, the norm's and
  // activation's backward; the attention backward's for the query, key and value projections, whose
  // rotary backward Inductor generates): its amax fuses there when compiled.
  KernelCost grad;
  torchao_tensor(l.rows, l.rows, l.n, true, w, grad, grad);
  bwd += grad;
}

void casts(const std::vector<Fp8Linear>& linears, const LayerWork& w, KernelCost& fwd, KernelCost& bwd) {
  if (!under_fp8(w)) return;
  for (const Fp8Linear& l : linears) {
    if (w.fp8_recipe == Fp8Recipe::TorchaoTensorwise) {
      torchao_linear(l, w, fwd, bwd);
    } else {
      te_input(l, w, fwd, bwd);
      te_grad_output(l, w, bwd);
    }
  }
}

}  // namespace

std::vector<Fp8Linear> fp8_linears(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  if (!under_fp8(w)) return {};
  const LayerRows r = layer_rows(m, w, moe_layer);
  const double t = w.tp, h = m.hidden, f = m.ffn_hidden;
  const double A = double(m.heads) * m.head_dim, Kv = double(m.kv_heads) * m.head_dim;
  const double gates = m.mlp == MlpKind::SwiGlu ? 2 : 1;
  // A column-parallel linear after a norm gathers the norm's sp_tokens rows under SP.
  return {{r.tokens, r.sp_tokens, h, (A + 2 * Kv) / t, 1, Fp8Input::Norm},
          {r.tokens, r.tokens, A / t, h, 1, Fp8Input::Other},
          moe_layer
              ? Fp8Linear{r.mlp_rows, r.mlp_rows, h, gates * f / r.mlp_tp, r.experts_read, Fp8Input::Other}
              : Fp8Linear{r.tokens, r.sp_tokens, h, gates * f / t, 1, Fp8Input::Norm},
          {r.mlp_rows, r.mlp_rows, f / r.mlp_tp, h, r.experts_read, Fp8Input::Activation}};
}

std::vector<Fp8Linear> fp8_op_recompute_linears(const ModelSpec& m, const LayerWork& w, bool moe_layer) {
  const std::vector<Fp8Linear> all = fp8_linears(m, w, moe_layer);
  if (all.empty()) return all;
  // fp8_linears' fused linears: QKV, output, the MLP's first (gate and up under SwiGLU), down.
  const std::vector<LayerLinear> fused = layer_linears(m.mlp, Projections::Fused);
  const std::vector<LayerLinear> linears = layer_linears(m.mlp, w.projections);
  std::vector<Fp8Linear> out;
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!op_recomputes(i, linears.size())) continue;
    // A separate projection: its share of the fused linear's output columns.
    const LayerLinear whole = fused_linear(linears[i], m.mlp);
    Fp8Linear linear = all[size_t(std::find(fused.begin(), fused.end(), whole) - fused.begin())];
    linear.n *= linear_widths(m, linears[i]).out / linear_widths(m, whole).out;
    out.push_back(linear);
  }
  return out;
}

KernelCost fp8_casts_forward(const std::vector<Fp8Linear>& linears, const LayerWork& w) {
  KernelCost fwd, bwd;
  casts(linears, w, fwd, bwd);
  return fwd;
}

KernelCost fp8_casts_backward(const std::vector<Fp8Linear>& linears, const LayerWork& w) {
  KernelCost fwd, bwd;
  casts(linears, w, fwd, bwd);
  return bwd;
}

KernelCost fp8_weight_casts_per_step(const std::vector<Fp8Linear>& linears, const LayerWork& w) {
  KernelCost c;
  if (!under_fp8(w) || w.fp8_recipe == Fp8Recipe::TorchaoTensorwise) return c;
  // fp8_cast_transpose_fused over the weight (current scaling: after its amax pass).
  const double e = element_bytes(w.precision);
  for (const Fp8Linear& l : linears) {
    const double elements = l.k * l.n * l.weight_copies;
    if (w.fp8_recipe == Fp8Recipe::TeCurrent) add(c, e * elements, 1);
    add(c, (e + 2 * kFp8) * elements, 1);
  }
  return c;
}

}  // namespace paratwin::cost
