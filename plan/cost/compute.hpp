// Compute cost of the kernels of one transformer layer (and of the embedding, head and optimizer),
// and their duration on a device: every GEMM by its shape (tile and wave quantization over the
// device's SMs, then a roofline), fused attention at its measured kernel rate, memory-bound kernels
// at a share of the memory bandwidth.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "plan/cost/fused_attention_rate.hpp"
#include "plan/spec/cluster.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::cost {

// `count` launches of one GEMM shape: each runs `batch` independent (m x k) by (k x n) products
// (attention's per-head products are batched) and reads `weight_copies` distinct k x n operands per
// product (a grouped expert GEMM reads several), or, for a grouped GEMM's weight gradient
// (`copies_are_results`), writes that many distinct m x n results.
struct Gemm {
  double m = 0, n = 0, k = 0;
  double batch = 1;
  double weight_copies = 1;
  bool copies_are_results = false;
  bool attention = false;  // an unfused attention score or value product (efficiency.attention)
  // Under fp8 training: whether it runs in fp8 (Transformer Engine's linear layers) or stays in 16
  // bits (the output layer, the router, attention).
  bool fp8 = true;
  double count = 1;

  bool same_shape(const Gemm& o) const {
    return m == o.m && n == o.n && k == o.k && batch == o.batch && weight_copies == o.weight_copies &&
           copies_are_results == o.copies_are_results && attention == o.attention && fp8 == o.fp8;
  }
  double flops() const { return 2 * m * n * k * batch * count; }
  // Operands read and the result written by one launch, at `element` bytes each.
  double bytes(double element) const {
    const double operand = copies_are_results ? 1 : weight_copies,
                 results = copies_are_results ? weight_copies : 1;
    return element * batch * (m * k + operand * k * n + results * m * n);
  }
};

// The GEMM shapes of a group of kernels, shared between the copies of one pass's cost (lowering
// gives every micro-batch's pass the same cost; copying it must not copy the shapes).
class GemmList {
 public:
  const Gemm* begin() const { return v_ ? v_->data() : nullptr; }
  const Gemm* end() const { return v_ ? v_->data() + v_->size() : nullptr; }
  size_t size() const { return v_ ? v_->size() : 0; }
  // Adds `count` more launches of g's shape (merged with an equal shape already listed).
  void add(const Gemm& g);
  // Takes `g.count` launches of g's shape away (the shape must be listed with at least that many).
  void remove(const Gemm& g);
  GemmList times(double k) const;  // every count times k

 private:
  std::shared_ptr<const std::vector<Gemm>> v_;
};

// What a group of kernels does: math, memory traffic, and how many kernels it launches.
struct KernelCost {
  Flops gemm_flops;            // model FLOPs of matrix multiplications (attention's at the full s x s square)
  Flops attention_flops;       // of gemm_flops, attention's score and value products
  Bytes gemm_bytes;            // operand and result traffic of the GEMMs listed in `gemms`
  GemmList gemms;              // the GEMMs launched, by shape (the unfused attention products among them)
  Flops flash_forward_flops;   // executed by fused attention forward kernels (causal: half the square)
  Flops flash_backward_flops;  // and by their backward (2.5x the forward: it recomputes the scores)
  // Executed by fused attention kernels over blocks without a mask (context parallelism's ring steps
  // past the first: plan/cost/ring_attention.hpp), forward and backward: the kernel's non-causal rate.
  Flops flash_full_forward_flops, flash_full_backward_flops;
  AttentionKind fused_kernel = AttentionKind::Flash;  // which fused attention kernel runs them
  int fused_head_dim =
      0;  // the model's head dimension in them (the kernel may pad it: fused_kernel_head_dim)
  // The key length each of their rows runs over (the sequence; a ring block's side): their rates
  // depend on it (plan/cost/fused_attention_rate.hpp). 0: unknown, the device's figures as given.
  double fused_key_length = 0;
  Bytes elementwise_bytes;  // activations, residuals, their dropout, the loss's softmax
  Bytes norm_bytes;         // normalization kernels (LayerNorm, fused RMSNorm)
  Bytes eager_norm_bytes;   // eager PyTorch's composite RMSNorm (ATen's casts, pow, mean and products)
  Bytes gated_bytes;        // gated activations over the two halves of one GEMM's output
  Bytes scores_bytes;       // unfused attention's kernels over the s x s scores (mask, softmax, dropout)
  Bytes optimizer_bytes;    // the optimizer step's update kernel
  int launches = 0;
  // Of launches, those the device waits for the host to dispatch (all of them under
  // training.launch_blocking: launched_as_trained sets them).
  int synchronous_launches = 0;
  // Of launches, those the host issues only after waiting for the device: a device-to-host copy the
  // host needs before it can launch what follows (an MoE layer's token counts per expert, which the
  // all-to-all's split sizes and the grouped GEMM's row splits are given as), so the device idles while
  // the host dispatches the next kernel. Each costs efficiency.synchronous_launch, as under
  // training.launch_blocking (launched_as_trained counts them in synchronous_launches).
  int host_syncs = 0;

  // All four fused attention figures: whether fused_kernel matters.
  Flops fused_attention_flops() const {
    return flash_forward_flops + flash_backward_flops + flash_full_forward_flops + flash_full_backward_flops;
  }

  // The HBM traffic of its memory-bound kernels, of every kind; and every byte its kernels move.
  Bytes memory_bound_bytes() const;
  Bytes traffic() const { return gemm_bytes + memory_bound_bytes() + optimizer_bytes; }

  KernelCost& operator+=(const KernelCost& o);
  KernelCost operator*(int k) const;  // k times the same work (k layers), launches included
};

// The kinds of memory-bound kernel, each with its bytes in KernelCost and its own share of the memory
// bandwidth (EfficiencySpec::memory_share; nullptr: efficiency.memory): the one list that KernelCost's
// sums, the cost model's time and calibration's fit go through.
struct MemoryBoundKind {
  Bytes KernelCost::*bytes;
  std::optional<double> EfficiencySpec::*share;
};
inline constexpr MemoryBoundKind kMemoryBoundKinds[] = {
    {&KernelCost::elementwise_bytes, nullptr},
    {&KernelCost::norm_bytes, &EfficiencySpec::norm},
    {&KernelCost::eager_norm_bytes, &EfficiencySpec::eager_norm},
    {&KernelCost::gated_bytes, &EfficiencySpec::gated},
    {&KernelCost::scores_bytes, &EfficiencySpec::scores},
};

// Every memory-bound byte of `cost` as a byte at efficiency.memory: each kind's bytes scaled by memory
// over its own share, so that one rate times `memory` times all of them.
double memory_equivalent_bytes(const KernelCost& cost, const EfficiencySpec& e);

// `launches` memory-bound kernels that move `bytes` of HBM traffic in all (elementwise_bytes).
KernelCost memory_bound_kernels(double bytes, int launches = 1);
// A normalization kernel that moves `bytes` of HBM traffic (norm_bytes).
KernelCost norm_kernel(double bytes);
// Eager PyTorch's composite RMSNorm: `launches` ATen kernels that move `bytes` (eager_norm_bytes).
KernelCost eager_norm_kernels(double bytes, int launches);
// A gated activation over the two halves of one GEMM's output: `launches` kernels that move `bytes`
// (gated_bytes).
KernelCost gated_kernels(double bytes, int launches = 1);
// Unfused attention's kernels over its s x s scores: `launches` kernels that move `bytes` (scores_bytes).
KernelCost scores_kernels(double bytes, int launches = 1);
// The fp32 upcast and the cast back that eager PyTorch code wraps around an op it computes in fp32, per
// element of e bytes: reads e and writes 4, then reads 4 and writes e; nothing in fp32 training.
double upcast_round_trip_bytes(double e);

// Share of a tile grid that a GEMM's tiles fill: a GEMM runs as ceil(m / tm) x ceil(n / tn) x batch
// tiles, one per SM at a time, in waves; the last wave and the tiles' edges may be partly idle. The
// best of the tensor-core tile shapes cuBLAS and CUTLASS use for large GEMMs (256x128, 128x256,
// 128x128, 128x64, 64x128) is taken, as cuBLAS's heuristics choose among them. 1 for sms = 0.
// NVIDIA's "Matrix Multiplication Background User's Guide" (tile and wave quantization).
double wave_efficiency(const Gemm& gemm, int sms);

// Share of its main loop's rate a GEMM reaches over its reduction length K: each output tile runs
// K / k_step steps of its main loop, each over 128 bytes of an operand row (64 elements at 16 bits, 128
// at 8: the K depth of the tensor-core tiles cuBLAS and CUTLASS run on sm_90), and spends about
// efficiency.gemm_tile_k_steps more filling its operand pipeline and writing its result, so
//   K / (K + gemm_tile_k_steps x k_step)
// 1 where the device file leaves gemm_tile_k_steps out. On H100 (2 steps) this takes the mean error of
// the model over OpenXLA's sm_90 bf16 table (37 shapes of 8 GFLOP and more) from 10.8% to 2.5%, and
// reproduces Azure's sustained fp8 sweep (4096^3 ... 32768^3) within 2% (docs/catalog.md).
double gemm_k_share(const Gemm& gemm, const DeviceSpec& device, Precision precision);

// One launch of `gemm` (count ignored):
//   max(2 m n k batch / (peak x efficiency x wave_efficiency x gemm_k_share), bytes /
//   (memory_bandwidth x efficiency.memory))
// with efficiency.gemm (efficiency.attention for unfused attention products, when given, without
// wave quantization: a measured rate of those products). Under fp8 training the GEMMs marked fp8 run
// at the fp8 peak and efficiency.gemm_fp8 (efficiency.gemm if absent), the others at the 16-bit peak.
Seconds gemm_time(const Gemm& gemm, const DeviceSpec& device, Precision precision);

// Sum of every kernel's time:
//   sum over GEMMs of count x gemm_time
//   + flash_forward_flops / (attention peak x efficiency.<fused_kernel>.forward)
//   + flash_backward_flops / (attention peak x efficiency.<fused_kernel>.backward)
//   + flash_full_forward_flops / (attention peak x efficiency.<fused_kernel>.forward_full)
//   + flash_full_backward_flops / (attention peak x efficiency.<fused_kernel>.backward_full)
//     (the non-causal figures; the causal ones where the device file has none)
//   + elementwise_bytes / (memory_bandwidth x efficiency.memory)
//   + norm_bytes / (memory_bandwidth x efficiency.norm)
//   + eager_norm_bytes / (memory_bandwidth x efficiency.eager_norm)
//   + gated_bytes / (memory_bandwidth x efficiency.gated)
//   + scores_bytes / (memory_bandwidth x efficiency.scores)
//   + optimizer_bytes / (memory_bandwidth x efficiency.optimizer)
//   + launches x efficiency.kernel_launch
//   + synchronous_launches x efficiency.synchronous_launch
// Fused attention runs at the 16-bit peak under fp8 (Transformer Engine keeps attention in bf16), its
// FLOPs scaled by fused_kernel_head_dim / fused_head_dim (the kernel's padded head). The efficiency
// figures are the kernel's at fused_key_length (fused_rates_at: by_seq_len in the device file).
// `flash` takes the device's flash3 figures, else its flash2 ones; `triton` its triton ones
// (fused_kernel_of); a device without figures for the kernel runs it at efficiency.gemm (scenarios
// that ask for triton are checked to have them). A device without a peak at `precision`
// is a programming error (checked when scenarios load).
Seconds compute_time(const KernelCost& cost, const DeviceSpec& device, Precision precision);

// compute_time by kind of kernel, the terms it adds up: the linear layers' GEMMs; attention (the fused
// kernel, or the unfused score and value products); memory-bound kernels (elementwise, norms, the
// optimizer's passes); and the launches' own cost. A question users ask of a step ("is it the
// attention?") and the first one to ask of a prediction that is off.
struct KernelTimes {
  double gemm_s = 0;
  double attention_s = 0;
  double memory_bound_s = 0;
  double launch_s = 0;

  double total() const { return memory_bound_s + launch_s + attention_s + gemm_s; }
  KernelTimes& operator+=(const KernelTimes& o) {
    gemm_s += o.gemm_s;
    attention_s += o.attention_s;
    memory_bound_s += o.memory_bound_s;
    launch_s += o.launch_s;
    return *this;
  }
  KernelTimes scaled(double f) const {
    return {gemm_s * f, attention_s * f, memory_bound_s * f, launch_s * f};
  }
};
KernelTimes kernel_times(const KernelCost& cost, const DeviceSpec& device, Precision precision);

// kernel_times of many kernel groups on one device at one precision, each distinct GemmList's GEMMs
// costed once: lowering gives the copies of a pass (every micro-batch's) one list. The same figures,
// summed in the same order. The groups' lists must outlive the timer (it knows them by address).
class KernelTimer {
 public:
  KernelTimer(const DeviceSpec& device, Precision precision) : device_(device), precision_(precision) {}
  KernelTimes operator()(const KernelCost& cost);

 private:
  const DeviceSpec& device_;
  Precision precision_;
  std::unordered_map<const Gemm*, KernelTimes> gemms_;  // by the list's first shape: its GEMMs' terms
};

// A lower bound of compute_time that adds up over kernel groups: GEMMs at their compute rate only,
// plus the other terms. compute_time(a + b) >= bound(a) + bound(b) for any groups, which is what the
// optimizer's branch and bound needs.
Seconds compute_time_bound(const KernelCost& cost, const DeviceSpec& device, Precision precision);

// The GEMM time of `cost` at efficiency.gemm = 1 (wave quantization and the attention products'
// own rate included): what calibration divides by a measured GEMM time to fit efficiency.gemm.
double dense_gemm_seconds_at_full_efficiency(const KernelCost& cost, const DeviceSpec& device,
                                             Precision precision);

// `cost` as the training launches it: under training.launch_blocking every launch is synchronous
// (the host dispatches each kernel only after the previous one has ended, and the device waits for
// it); otherwise those after a host sync (host_syncs) are. Lowering and the optimizer's bounds cost
// every compute task through it.
KernelCost launched_as_trained(KernelCost cost, const TrainingSpec& training);

struct LayerWork {
  int micro_batch = 1;  // b
  int seq_len = 0;      // s, full sequence; queries per rank are s / cp, keys all s
  int tp = 1;
  int cp = 1;
  bool sequence_parallel = false;
  Precision precision = Precision::Bf16;
  AttentionKind attention = AttentionKind::Flash;
  int ep = 1;  // expert parallelism: each rank holds experts / ep of an MoE layer's experts
  // MoE parallel folding (Plan::expert_tp, folds_experts): the experts' tp, below tp; 0 for tp. Folded,
  // an MoE layer's router and dispatcher work on the rank's sequence-parallel share of the tokens and
  // its experts on what the EP group sends them, expert_tp-way split.
  int expert_tp = 0;
  // The token assignments an MoE layer's experts on this rank run, over the balanced count (the
  // hottest EP rank's load, plan/cost/expert_load.hpp): 1 under balanced routing.
  double expert_load = 1;
  // The keys a query attends at most in this layer (ModelSpec::attention_window): 0 for the whole
  // causal prefix. A fused kernel skips the key blocks outside the window; unfused attention and the
  // CP rings compute the whole square.
  int attention_window = 0;
  // The model repeats grouped-query attention's key and value heads to the query heads before the
  // attention kernel (torchtitan's Llama: repeat_kv before F.scaled_dot_product_attention), so context
  // parallelism moves them at the query heads (training.repeat_kv).
  bool repeat_kv = false;
  CpAttention cp_attention = CpAttention::Gather;                     // training.cp_attention
  CpRotate cp_rotate = CpRotate::AllGather;                           // training.cp_rotate
  TpOverlap tp_overlap = TpOverlap::AsyncTp;                          // training.tp_overlap
  LayerKernels kernels = LayerKernels::Fused;                         // training.kernels
  Projections projections = Projections::Fused;                       // training.projections
  Rotary rotary = Rotary::Complex;                                    // training.rotary
  CrossEntropy cross_entropy = CrossEntropy::Unfused;                 // training.cross_entropy
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;             // training.moe_dispatcher
  TensorParallelImpl tensor_parallel = TensorParallelImpl::Megatron;  // training.tensor_parallel
  Fp8Recipe fp8_recipe = Fp8Recipe::TeDelayed;                        // training.fp8_recipe, under fp8
  bool fp8_param_gather = false;                                      // training.fp8_param_gather
  // The plan decomposes the sequence-parallel collectives with their GEMMs (plan.overlap.tp).
  bool overlap_tp = false;
};

// One layer's work at these degrees under `training` (its sequence length, precision and attention
// settings): lowering and the optimizer's tables build it here alike. expert_load stays 1.
LayerWork layer_work(const TrainingSpec& training, int micro_batch, int tp, int cp, bool sequence_parallel,
                     int ep, bool overlap_tp);

// The rows one rank's layer works on per micro-batch: `tokens`, every GEMM's (b s / cp; SP all-gathers
// before them), `sp_tokens`, the norms' and residuals' (1/tp of them under SP), `mlp_rows`, the MLP's
// (an MoE layer's top_k copies at work.expert_load), and `experts_read`, the distinct MLP weights its
// GEMMs read (1 for a dense layer).
struct LayerRows {
  double tokens = 0, sp_tokens = 0, mlp_rows = 0, experts_read = 1;
  double mlp_tp = 1;  // the ranks the MLP's columns are split over: tp, or expert_tp for folded experts
};
// Whether an MoE layer's experts are folded (LayerWork::expert_tp below tp).
inline bool folds_experts(const LayerWork& w) {
  return w.expert_tp > 0 && w.expert_tp < w.tp;
}
LayerRows layer_rows(const ModelSpec& model, const LayerWork& work, bool moe_layer);

// Forward of one transformer layer on one rank (1/tp of the heads and MLP columns; with SP the norms
// and dropout work on 1/tp of the tokens). Under fp8 its linears' quantization passes besides
// (fp8_casts.hpp). GEMM FLOPs are the model FLOPs of training_flops_per_token
// divided by 3 and by tp, per token of the micro-batch on this rank: their sum over layers, ranks and
// passes equals the model's training FLOPs. `moe_layer` uses top_k experts (plus the router), its
// experts' rows scaled by work.expert_load.
KernelCost layer_forward(const ModelSpec& model, const LayerWork& work, bool moe_layer);
// The copies PyTorch's functional collectives make around `all_gathers` and `reduce_scatters` of a
// layer's sequence-parallel collectives under training.tensor_parallel dtensor ([b, s, h] sharded on
// the sequence, dimension 1; NCCL gathers and scatters dimension 0): torch.cat of the all-gather
// output's chunks along dimension 1, and of the reduce-scatter input's dimension-1 chunks before it
// (torch/distributed/_functional_collectives.py, all_gather_tensor and reduce_scatter_tensor). Each
// reads and writes the whole activation, b s/cp x h, in the collective's dtype (layer_collective_bytes:
// torchao's float8 TP gathers, and so concatenates, float8 data, forward and backward). A layer's pass
// runs two of each (forward: the QKV and MLP inputs gathered, the output and down projections'
// results scattered; backward: the reverse). Empty without sequence parallelism, under megatron
// (sequence first: the shards are contiguous) and under TP overlap (AsyncTP's fused_all_gather_matmul
// and fused_matmul_reduce_scatter take the dimension and write each piece in place).
KernelCost sequence_shard_copies(const ModelSpec& model, const LayerWork& work, int all_gathers,
                                 int reduce_scatters);
// Backward: each GEMM becomes two (input gradient: m x n by n x k; weight gradient: k x m by m x n),
// fused attention runs its backward kernel, memory-bound kernels move about twice the traffic; an MoE
// layer's permutations move the gradients back as the forward moved the tokens (once their traffic);
// under fp8, the linears' backward quantization passes (fp8_casts.hpp). Under training.kernels eager,
// autograd's own kernels besides (eager_autograd_backward).
KernelCost layer_backward(const ModelSpec& model, const LayerWork& work, bool moe_layer);
// What PyTorch autograd runs in one layer's backward besides the backward of the forward's kernels,
// for eager nn.Modules (training.kernels: eager). Where one tensor feeds several ops, autograd sums
// their gradients into it, a kernel that reads two and writes one (InputBuffer::add): each residual
// stream feeds its norm and its residual add; with separate projections (training.projections) the
// norm's output feeds the query, key and value linears and SwiGLU's gate and up linears. With one
// fused QKV projection split into views (llm-foundry's MPT), the split's backward concatenates the
// three gradients instead (reads and writes tokens x (A + 2 Kv) / tp x e). With biases, each linear's
// bias gradient is a reduction of its output gradient over the rows (reads rows x outputs x e;
// derivatives.yaml's addmm/linear). Memory-bound, linear in the hidden size: it weighs most on small
// models. Empty under training.kernels: fused.
KernelCost eager_autograd_backward(const ModelSpec& model, const LayerWork& work, bool moe_layer);
// Selective recompute: the attention core (QK^T, softmax, attention over V) of the forward again.
// Under context parallelism over fused attention: the ring's blocks and merges (ring_attention.hpp).
KernelCost attention_core_forward(const ModelSpec& model, const LayerWork& work);

// The (query, key) pairs a sliding window of `window` keys leaves to `queries` queries that are the
// last of `keys` causal positions: each query at position i attends min(i + 1, window) keys. What a
// fused kernel executes of a windowed layer (attention_core_forward), against the causal half square.
double windowed_keys(double queries, double keys, double window);

// What recomputing one layer in `mode` runs before its backward: full, the layer's forward; selective,
// its `modules` (the attention core; an MoE layer's pre-MLP norm and its experts' activation); op
// (torchtitan's per-operator policy), the linears it does not keep (every second in forward order)
// and the memory-bound kernels; none, nothing. The one home of recompute work for lowering and the
// optimizer.
KernelCost recompute_forward(const ModelSpec& model, const LayerWork& work, Recompute mode, bool moe_layer,
                             const RecomputeModules& modules = {});

// `whole` less `part`, where `part` is attention, GEMMs `whole` lists and memory-bound work (no
// optimizer step): the share of a pass lowering runs as a task of its own (the CP ring's blocks beside
// their transfers, the TP overlap's GEMM pieces: plan/cost/tp_overlap.hpp).
KernelCost without(const KernelCost& whole, const KernelCost& part);

// Embedding lookup (memory-bound) forward.
KernelCost embedding_forward(const ModelSpec& model, const LayerWork& work);
// Its backward: the same traffic scattered into the gradient rows, the dense V / tp x h gradient
// zeroed first (e bytes a parameter), and, with gradient_buffer_bytes > 0 (cost::gradient_buffer_bytes:
// a whole-step gradient buffer, Megatron-Core's main_grad), that gradient added into the buffer each
// micro-batch (2 g + e bytes a parameter).
KernelCost embedding_backward(const ModelSpec& model, const LayerWork& work, double gradient_buffer_bytes);
// Final norm, logits GEMM (2 b s h V / tp FLOPs) and cross-entropy, forward and backward: unfused, 22
// and 26 bytes per bf16 logit in 4 kernels each; vocab_parallel, 38 and 14 bytes in 18 and 8 kernels;
// fused, e and 2 e bytes in one kernel each (training.cross_entropy).
KernelCost head_forward(const ModelSpec& model, const LayerWork& work);
KernelCost head_backward(const ModelSpec& model, const LayerWork& work);

// What training.grad_accumulation copy or unfused runs with a micro-batch's backward over `parameters`
// parameters of `tensors` tensors. copy: each 16-bit gradient of `element` bytes upcast to a temporary
// (read e, write 4) and added into the buffer's `buffer`-byte element (read both, write one):
// DeepSpeed's BF16_Optimizer update_hp_grads, hp_grad.add_(lp.grad.to(fp32)), two kernels a tensor.
// unfused: Megatron-LM's hook, main_grad.add_(grad), one kernel a tensor that reads both and writes
// the buffer's element. In place: nothing.
KernelCost gradient_copy(GradAccumulation mode, double parameters, double element, double buffer,
                         int tensors);
// The parameter tensors of one dense transformer layer: its linears' weights (fused or separate
// projections; SwiGLU's gate and up), their biases where the model has them, and its two norms' weights
// (and a LayerNorm's biases).
int parameter_tensors_per_layer(const ModelSpec& model, Projections projections);

// One optimizer step over `parameters` parameters held by this rank (its ZeRO shard): memory-bound,
// the clipping norm's read of the gradients, then reading and writing master weights, moments,
// gradients and the working copy; under fp16 first the loss scale's unscale and overflow check.
KernelCost optimizer_step(double parameters, const TrainingSpec& training);
// The rank's gradient buffer zeroed once a step, before the first micro-batch accumulates into it:
// Megatron-Core's DistributedDataParallel.zero_grad_buffer (each _ParamAndGradBuffer's grad_data.zero_(),
// every parameter of the rank, not only its optimizer shard), DeepSpeed's BF16_Optimizer clear_hp_grads.
// A memory-bound write of gradient_buffer_bytes a parameter, counted with the optimizer step's traffic
// (optimizer_bytes: the step's task is fitted as one by calibrate); nothing where there is no buffer.
KernelCost gradient_buffer_zeroing(double parameters, double gradient_buffer_bytes);

}  // namespace paratwin::cost
