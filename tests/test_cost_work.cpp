// A layer's work: FLOPs against the model's training FLOPs, the loss's and the gradients' memory-bound
// passes, eager PyTorch's kernels, the optimizer step.
#define BOOST_TEST_MODULE cost_work
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "catalog_files.hpp"
#include "plan/cost/collectives.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/fused_attention_rate.hpp"
#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/memory.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"

using namespace paratwin;
using namespace paratwin::cost;
using namespace paratwin::test;
namespace tt = boost::test_tools;

// ---- FLOPs: per-rank kernels add up to the model's training FLOPs ----

// Forward GEMM FLOPs of every layer and the head on one rank, times the tp x cp ranks sharing the
// micro-batch, times 3 for forward + backward.
static double training_flops_of_micro_batch(const ModelSpec& m, const LayerWork& w) {
  double forward = head_forward(m, w).gemm_flops.value();
  for (int l = 0; l < m.layers; ++l) forward += layer_forward(m, w, m.is_moe_layer(l)).gemm_flops.value();
  return 3 * forward * w.tp * w.cp;
}

BOOST_AUTO_TEST_CASE(dense_gpt_layer_flops_add_up_to_training_flops_per_token) {
  const ModelSpec m = model("gpt3-175b");
  LayerWork w;
  w.micro_batch = 2;
  w.seq_len = 2048;
  w.tp = 8;
  w.sequence_parallel = true;
  BOOST_TEST(training_flops_of_micro_batch(m, w) == training_flops_per_token(m, 2048) * 2 * 2048,
             tt::tolerance(1e-12));
  // A shorter sequence than the model's, split by context parallelism, on a GQA model.
  const ModelSpec llama = model("llama3-8b");
  w.seq_len = 4096;
  w.tp = 4;
  w.cp = 2;
  BOOST_TEST(training_flops_of_micro_batch(llama, w) == training_flops_per_token(llama, 4096) * 2 * 4096,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(moe_layer_flops_add_up_to_training_flops_per_token) {
  const ModelSpec m = model("mixtral-8x7b");
  LayerWork w;
  w.seq_len = 8192;
  w.tp = 2;
  w.cp = 2;
  BOOST_TEST(training_flops_of_micro_batch(m, w) == training_flops_per_token(m, 8192) * 8192,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(backward_doubles_the_forward_gemms) {
  const ModelSpec m = model("gpt3-175b");
  LayerWork w;
  w.seq_len = 2048;
  w.tp = 8;
  BOOST_TEST(layer_backward(m, w, false).gemm_flops.value() ==
             2 * layer_forward(m, w, false).gemm_flops.value());
  BOOST_TEST(head_backward(m, w).gemm_flops.value() == 2 * head_forward(m, w).gemm_flops.value());
  // Logits: 2 b s h V / t.
  BOOST_TEST(head_forward(m, w).gemm_flops.value() == 2.0 * 2048 * 12288 * 51200 / 8, tt::tolerance(1e-12));
}

// The head's memory-bound bytes per logit a doubled vocabulary adds, forward and backward: only the
// logits grow with the vocabulary (the final norm stays).
static std::pair<double, double> head_bytes_per_added_logit(const ModelSpec& small, const LayerWork& w) {
  ModelSpec large = small;
  large.vocab = 2 * small.vocab;
  const double added_logits = double(w.micro_batch) * w.seq_len * (large.vocab - small.vocab) / w.tp;
  const auto traffic = [&](const KernelCost& c) { return c.elementwise_bytes.value(); };
  return {(traffic(head_forward(large, w)) - traffic(head_forward(small, w))) / added_logits,
          (traffic(head_backward(large, w)) - traffic(head_backward(small, w))) / added_logits};
}

// The head's forward and backward bytes per added logit are `forward` and `backward`.
static void check_bytes_per_added_logit(const ModelSpec& m, const LayerWork& w, double forward,
                                        double backward) {
  const auto [f, b] = head_bytes_per_added_logit(m, w);
  BOOST_TEST(f == forward, tt::tolerance(1e-9));
  BOOST_TEST(b == backward, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(cross_entropy_moves_48_bytes_per_bf16_logit_through_hbm) {
  // Unfused fp32 cross-entropy: forward 2 + 4 (upcast) + 3 x 4 + 4 (softmax passes) = 22 bytes per
  // logit, backward 4 + 16 + 4 + 2 = 26.
  LayerWork w;
  w.seq_len = 2048;
  w.tp = 8;
  check_bytes_per_added_logit(model("gpt3-175b"), w, 22, 26);
}

BOOST_AUTO_TEST_CASE(fused_cross_entropy_reads_each_logit_once_forward_and_twice_backward) {
  // flash-attn's kernels: forward reads the bf16 logit (2 bytes), backward reads it and writes its
  // gradient (4), one launch each; the head keeps the logits only, no fp32 softmax.
  const ModelSpec small = model("mpt-125m");
  LayerWork w;
  w.seq_len = 2048;
  w.micro_batch = 2;
  w.cross_entropy = CrossEntropy::Fused;
  check_bytes_per_added_logit(small, w, 2, 4);
  LayerWork unfused = w;
  unfused.cross_entropy = CrossEntropy::Unfused;
  BOOST_TEST(head_forward(small, unfused).launches - head_forward(small, w).launches == 3);
  BOOST_TEST(head_forward(small, w).gemm_flops.value() == head_forward(small, unfused).gemm_flops.value());
  ActivationConfig a;
  a.micro_batch = 2;
  a.seq_len = 2048;
  const double unfused_kept = head_activation_bytes(small, a).value();
  a.cross_entropy = CrossEntropy::Fused;
  BOOST_TEST(head_activation_bytes(small, a).value() == unfused_kept * 2 / 6, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(megatron_vocab_parallel_cross_entropy_moves_52_bytes_per_bf16_logit) {
  // Megatron-LM's vocab_parallel_cross_entropy: forward .float() (2 + 4), max (4), sub_ (8), exp in
  // place (8), sum (4), div_ (8) = 38; backward mul_ (8) and the cast back (4 + 2) = 14. 18 and 8
  // launches (the passes over the logits and the small kernels on one value a token), 14 and 4 more
  // than F.cross_entropy's; the same fp32 softmax kept for the backward.
  LayerWork w;
  w.seq_len = 4096;
  w.tp = 2;
  w.cross_entropy = CrossEntropy::VocabParallel;
  const ModelSpec m = model("gpt3-175b");
  check_bytes_per_added_logit(m, w, 38, 14);
  LayerWork unfused = w;
  unfused.cross_entropy = CrossEntropy::Unfused;
  BOOST_TEST(head_forward(m, w).launches - head_forward(m, unfused).launches == 14);
  BOOST_TEST(head_backward(m, w).launches - head_backward(m, unfused).launches == 4);
  // In fp32 training `.float()` copies nothing: 32 and 8.
  w.precision = Precision::Fp32;
  check_bytes_per_added_logit(m, w, 32, 8);
  ActivationConfig a;
  a.seq_len = 4096;
  a.tp = 2;
  const double unfused_kept = head_activation_bytes(m, a).value();
  a.cross_entropy = CrossEntropy::VocabParallel;
  BOOST_TEST(head_activation_bytes(m, a).value() == unfused_kept);
}

BOOST_AUTO_TEST_CASE(the_embedding_gradient_is_dense_and_added_into_the_gradient_buffer) {
  // The word embedding's backward zeroes a dense V / tp x h gradient (2 bytes a parameter in bf16) and,
  // with a whole-step gradient buffer (fp32 main_grad: 4 bytes), adds it there: reads 4 + 2, writes 4.
  // 12 bytes a parameter a micro-batch, in two launches besides the lookup's scatter.
  const ModelSpec m = model("llama2-7b");
  LayerWork w;
  w.seq_len = 4096;
  w.tp = 4;
  const double table = double(m.vocab) * m.hidden / 4;
  const KernelCost lookup = embedding_forward(m, w);
  const KernelCost sharded = embedding_backward(m, w, 0);
  const KernelCost buffered = embedding_backward(m, w, 4);
  BOOST_TEST(sharded.elementwise_bytes.value() - lookup.elementwise_bytes.value() == 2 * table,
             tt::tolerance(1e-12));
  BOOST_TEST(buffered.elementwise_bytes.value() - lookup.elementwise_bytes.value() == 12 * table,
             tt::tolerance(1e-12));
  BOOST_TEST(buffered.launches - lookup.launches == 2);
  BOOST_TEST(buffered.gemm_flops.value() == 0);
  // The buffer: the gradient's bytes under ZeRO 0 and 1 (fp32 with grad_reduce fp32), none when sharded.
  TrainingSpec t;
  t.precision = Precision::Bf16;
  t.grad_reduce = Precision::Fp32;
  BOOST_TEST(gradient_buffer_bytes(t, 1) == 4);
  BOOST_TEST(gradient_buffer_bytes(t, 0) == 4);
  BOOST_TEST(gradient_buffer_bytes(t, 3) == 0);
  t.grad_reduce.reset();
  BOOST_TEST(gradient_buffer_bytes(t, 1) == 2);
}

BOOST_AUTO_TEST_CASE(the_gradient_buffer_is_zeroed_once_a_step) {
  // Megatron-Core's zero_grad_buffer: one write over every parameter of the rank, 4 bytes each in fp32.
  const KernelCost zeroing = gradient_buffer_zeroing(2e9, 4);
  BOOST_TEST(zeroing.optimizer_bytes.value() == 8e9, tt::tolerance(1e-12));
  BOOST_TEST(zeroing.launches == 1);
  BOOST_TEST(gradient_buffer_zeroing(2e9, 0).launches == 0);
  BOOST_TEST(gradient_buffer_zeroing(2e9, 0).optimizer_bytes.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_copied_gradient_is_upcast_then_added_into_the_buffer) {
  // DeepSpeed's update_hp_grads, hp_grad.add_(lp.grad.to(fp32)): the upcast reads 2 and writes 4, the add
  // reads 4 + 4 and writes 4: 18 bytes a parameter a micro-batch, two kernels a tensor.
  const KernelCost c = gradient_copy(GradAccumulation::Copy, 1e9, 2, 4, 12);
  BOOST_TEST(c.elementwise_bytes.value() == 18e9, tt::tolerance(1e-12));
  BOOST_TEST(c.launches == 24);
  // Megatron-LM's hook without the fusion, main_grad.add_(grad): reads 2 + 4, writes 4, one kernel.
  const KernelCost hook = gradient_copy(GradAccumulation::Unfused, 1e9, 2, 4, 12);
  BOOST_TEST(hook.elementwise_bytes.value() == 10e9, tt::tolerance(1e-12));
  BOOST_TEST(hook.launches == 12);
  // A layer's tensors: GPT (fused QKV, GELU, biases, LayerNorm) 4 linears x 2 + 2 norms x 2; Llama
  // (separate projections, SwiGLU, no biases, RMSNorm) 7 + 2.
  BOOST_TEST(parameter_tensors_per_layer(model("gpt3-175b"), Projections::Fused) == 12);
  BOOST_TEST(parameter_tensors_per_layer(model("llama2-7b"), Projections::Separate) == 9);
  // The bf16 gradients kept beside a whole fp32 buffer, under ZeRO 0 and 1 only.
  TrainingSpec t;
  t.precision = Precision::Bf16;
  t.grad_reduce = Precision::Fp32;
  t.grad_accumulation = GradAccumulation::Copy;
  BOOST_TEST(gradient_copy_bytes(t, 0) == 2);
  BOOST_TEST(gradient_copy_bytes(t, 1) == 2);
  BOOST_TEST(gradient_copy_bytes(t, 3) == 0);
  BOOST_TEST(held_model_state_bytes(1e9, 8, 1, false, t).gradients.value() == 6e9, tt::tolerance(1e-12));
  t.grad_accumulation = GradAccumulation::Unfused;  // added as it comes, nothing held
  BOOST_TEST(gradient_add_bytes(t, 1) == 2);
  BOOST_TEST(gradient_copy_bytes(t, 1) == 0);
  t.grad_accumulation = GradAccumulation::InPlace;
  BOOST_TEST(gradient_copy_bytes(t, 1) == 0);
  BOOST_TEST(gradient_add_bytes(t, 1) == 0);
}

BOOST_AUTO_TEST_CASE(the_losss_backward_holds_two_fp32_gradients_beside_its_saved_output) {
  // PyTorch's F.cross_entropy over fp32 logits: nll_loss's backward and log_softmax's each write an fp32
  // tensor of the logits' size beside the saved output, 12 bytes a logit against the 2 + 4 kept.
  const ModelSpec m = model("llama3-8b");
  ActivationConfig a;
  a.micro_batch = 2;
  a.seq_len = 8192;
  const double logits = 2.0 * 8192 * m.vocab;
  BOOST_TEST(head_activation_bytes(m, a).value() == 6 * logits, tt::tolerance(1e-12));
  BOOST_TEST(head_backward_transient_bytes(m, a).value() == 6 * logits, tt::tolerance(1e-12));
  a.tp = 8;  // vocabulary-parallel logits
  BOOST_TEST(head_backward_transient_bytes(m, a).value() == 6 * logits / 8, tt::tolerance(1e-12));
  a.cross_entropy = CrossEntropy::VocabParallel;  // in place on the saved softmax
  BOOST_TEST(head_backward_transient_bytes(m, a).value() == 0);
  a.cross_entropy = CrossEntropy::Fused;
  BOOST_TEST(head_backward_transient_bytes(m, a).value() == 0);
}

BOOST_AUTO_TEST_CASE(fsdp_keeps_no_16_bit_shard_of_the_weights) {
  // FSDP's sharded parameters are the fp32 master copy (the optimizer's K); DeepSpeed's ZeRO 3 keeps a
  // bf16 partition beside it. Under fp32 training the shard is the weights either way.
  TrainingSpec t;
  t.precision = Precision::Bf16;
  t.fsdp = FsdpCopies::Fsdp2;
  const ModelStateBytes fsdp = held_model_state_bytes(8e9, 8, 3, true, t);
  BOOST_TEST(fsdp.weights.value() == 0);
  BOOST_TEST(fsdp.optimizer.value() == 12e9, tt::tolerance(1e-12));
  t.fsdp = FsdpCopies::None;
  BOOST_TEST(held_model_state_bytes(8e9, 8, 3, true, t).weights.value() == 2e9, tt::tolerance(1e-12));
  t.fsdp = FsdpCopies::Fsdp1;
  t.precision = Precision::Fp32;
  BOOST_TEST(held_model_state_bytes(8e9, 8, 3, true, t).weights.value() == 4e9, tt::tolerance(1e-12));
  t.precision = Precision::Bf16;
  BOOST_TEST(held_model_state_bytes(8e9, 8, 1, false, t).weights.value() == 16e9, tt::tolerance(1e-12));
}

// A layer's work at `seq_len` x `micro_batch` under fused kernels, and the same under eager PyTorch.
static std::pair<LayerWork, LayerWork> fused_and_eager(int seq_len, int micro_batch) {
  LayerWork fused;
  fused.seq_len = seq_len;
  fused.micro_batch = micro_batch;
  LayerWork eager = fused;
  eager.kernels = LayerKernels::Eager;
  return {fused, eager};
}

BOOST_AUTO_TEST_CASE(eager_autograd_adds_bias_reductions_gradient_sums_and_the_qkv_concatenation) {
  // MPT-1b (GELU, biases, MHA, one Wqkv): the bias gradients read the four linears' output gradients,
  // 3h + h + 4h + h = 9h per token, the split's backward reads and writes dq, dk, dv (2 x 3h), and the
  // two residual streams' gradient sums read two and write one (2 x 3h): 21 h e bytes per token and 7
  // launches, none of them in the forward, none under fused kernels.
  const ModelSpec m = model("mpt-1b");
  const auto [fused, eager] = fused_and_eager(2048, 4);
  const double tokens = 4.0 * 2048;
  const KernelCost extra = eager_autograd_backward(m, eager, false);
  BOOST_TEST(extra.elementwise_bytes.value() == 2.0 * 21 * m.hidden * tokens, tt::tolerance(1e-12));
  BOOST_TEST(extra.launches == 7);
  BOOST_TEST(extra.gemm_flops.value() == 0);
  BOOST_TEST(eager_autograd_backward(m, fused, false).elementwise_bytes.value() == 0);
  BOOST_TEST(layer_backward(m, eager, false).elementwise_bytes.value() ==
                 layer_backward(m, fused, false).elementwise_bytes.value() + extra.elementwise_bytes.value(),
             tt::tolerance(1e-12));
  // LayerNorm, GELU and learned positions run as the same kernels eager or fused.
  BOOST_TEST(layer_forward(m, eager, false).elementwise_bytes.value() ==
             layer_forward(m, fused, false).elementwise_bytes.value());
  // Linear in the hidden size (the GEMMs grow with its square): twice the width, twice the bytes.
  ModelSpec wide = m;
  wide.hidden *= 2, wide.ffn_hidden *= 2, wide.heads *= 2, wide.kv_heads *= 2;
  BOOST_TEST(eager_autograd_backward(wide, eager, false).elementwise_bytes.value() ==
                 2 * extra.elementwise_bytes.value(),
             tt::tolerance(1e-12));
  // Without biases (Llama) the concatenation, 2 x (h + 2 kv), and the residual sums, 6h, per token.
  const ModelSpec llama = model("llama3-8b");
  const double h = llama.hidden, kv = double(llama.kv_heads) * llama.head_dim;
  BOOST_TEST(eager_autograd_backward(llama, eager, false).elementwise_bytes.value() ==
                 2.0 * (2 * (h + 2 * kv) + 6 * h) * tokens,
             tt::tolerance(1e-12));
  BOOST_TEST(eager_autograd_backward(llama, eager, false).launches == 3);
  // Separate wq, wk, wv, w1, w3 (torchtitan): no concatenation; the norms' outputs feed three and two
  // linears, whose input gradients autograd sums: 2 + 3 more sums of h per token.
  LayerWork separate = eager;
  separate.projections = Projections::Separate;
  BOOST_TEST(
      eager_autograd_backward(llama, separate, false).elementwise_bytes.value() == 2.0 * 3 * 5 * h * tokens,
      tt::tolerance(1e-12));
  BOOST_TEST(eager_autograd_backward(llama, separate, false).launches == 5);
}

static double memory_bound(const KernelCost& c) {
  return c.memory_bound_bytes().value();
}

BOOST_AUTO_TEST_CASE(eager_forward_runs_rmsnorm_rope_and_swiglu_as_pytorch_ops) {
  // Llama 3 8B in bf16. Eager RMSNorm: upcast (2 + 4), pow (4 + 4), mean (4), product (4 + 4), cast back
  // (4 + 2), weight (2 + 2): 36 bytes an element against the fused 4, 8 launches against 1. Rotary
  // embedding: upcast, complex product, cast back: 20 against 4 over the queries and keys, 6 launches
  // against 1. SwiGLU: SiLU then the product, 10 against 6, 2 launches against 1.
  const ModelSpec m = model("llama3-8b");
  const auto [fused, eager] = fused_and_eager(2048, 1);
  const double tokens = 2048, h = m.hidden, f = m.ffn_hidden;
  const double qk = (double(m.heads) + m.kv_heads) * m.head_dim;
  const KernelCost a = layer_forward(m, fused, false), b = layer_forward(m, eager, false);
  BOOST_TEST(memory_bound(b) - memory_bound(a) == tokens * (2 * 32 * h + 16 * qk + 4 * f),
             tt::tolerance(1e-12));
  BOOST_TEST(b.launches - a.launches == 2 * 7 + 5 + 1);
  // The fused norms are normalization kernels (efficiency.norm); the eager ones are ATen's elementwise
  // and reduction ops (efficiency.memory).
  BOOST_TEST(a.norm_bytes.value() == 2 * 2 * 2 * tokens * h, tt::tolerance(1e-12));
  BOOST_TEST(b.norm_bytes.value() == 0);
  BOOST_TEST(b.gemm_flops.value() == a.gemm_flops.value());
  // The backward is the forward's kernels' backward: twice their extra traffic, plus autograd's own.
  BOOST_TEST(memory_bound(layer_backward(m, eager, false)) - memory_bound(layer_backward(m, fused, false)) ==
                 2 * (memory_bound(b) - memory_bound(a)) +
                     eager_autograd_backward(m, eager, false).elementwise_bytes.value(),
             tt::tolerance(1e-12));
  // In fp32 nothing is upcast: RMSNorm 28 against 8 bytes, rotary embedding 8 against 8, SwiGLU 20
  // against 12.
  LayerWork fp32 = fused, fp32_eager = eager;
  fp32.precision = fp32_eager.precision = Precision::Fp32;
  BOOST_TEST(
      memory_bound(layer_forward(m, fp32_eager, false)) - memory_bound(layer_forward(m, fp32, false)) ==
          tokens * (2 * 20 * h + 8 * f),
      tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(fms_rotary_embedding_rotates_pairs_by_gathered_matrices_with_a_backward_of_its_own) {
  // Llama 2 13B in bf16, as fms-fsdp trains it (head dim 128). foundation-model-stack's RotaryEmbedding:
  // upcast (2 + 4), the pairs times their 2 x 2 matrices (4 + 8), summed over the pair (8 + 4), cast
  // back (4 + 2): 36 bytes an element of the queries and keys against the complex product's 20, plus the
  // matrices gathered once for the layer (64 pairs x 4 floats, read and written: 2048 bytes a token);
  // 4 launches a tensor and 5 for the positions and the gather, against 3 a tensor.
  const ModelSpec m = model("llama2-13b");
  const auto [fused, eager] = fused_and_eager(4096, 2);
  LayerWork fms = eager;
  fms.rotary = Rotary::RotationMatrix;
  const double tokens = 2.0 * 4096;
  const double qk = (double(m.heads) + m.kv_heads) * m.head_dim;
  const KernelCost complex = layer_forward(m, eager, false), matrix = layer_forward(m, fms, false);
  BOOST_TEST(matrix.elementwise_bytes.value() - complex.elementwise_bytes.value() ==
                 tokens * (16 * qk + 2 * 64 * 4 * 4),
             tt::tolerance(1e-12));
  BOOST_TEST(matrix.launches - complex.launches == 2 + 5);
  BOOST_TEST(matrix.gemm_flops.value() == complex.gemm_flops.value());
  // Its autograd backward is its own (the sum's backward is a view, the product's gradient is reduced
  // over the broadcast pair): 36 bytes an element in 8 launches, where the complex product's is its
  // forward's twice (40 bytes, 12 launches).
  BOOST_TEST(layer_backward(m, fms, false).elementwise_bytes.value() -
                     layer_backward(m, eager, false).elementwise_bytes.value() ==
                 tokens * (36 - 40) * qk,
             tt::tolerance(1e-12));
  BOOST_TEST(layer_backward(m, fms, false).launches - layer_backward(m, eager, false).launches == 8 - 12);
  // Under torch.compile Inductor generates one kernel for its real-valued ops.
  LayerWork compiled = fused;
  compiled.kernels = LayerKernels::Compiled;
  compiled.rotary = Rotary::RotationMatrix;
  BOOST_TEST(layer_forward(m, compiled, false).elementwise_bytes.value() ==
             layer_forward(m, fused, false).elementwise_bytes.value());
  BOOST_TEST(layer_backward(m, compiled, false).elementwise_bytes.value() ==
             layer_backward(m, fused, false).elementwise_bytes.value());
  // In fp32 nothing is cast: 24 bytes an element against 8.
  LayerWork fp32_complex = eager, fp32_fms = fms;
  fp32_complex.precision = fp32_fms.precision = Precision::Fp32;
  BOOST_TEST(layer_forward(m, fp32_fms, false).elementwise_bytes.value() -
                     layer_forward(m, fp32_complex, false).elementwise_bytes.value() ==
                 tokens * (16 * qk + 2 * 64 * 4 * 4),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(torch_compile_leaves_the_complex_rotary_product_to_aten) {
  // torchtitan's Llama multiplies torch.view_as_complex views by the frequencies; Inductor generates no
  // code for complex operators, so under torch.compile the upcast, ATen's complex product and the cast
  // back run as in eager PyTorch (20 bytes an element of the queries and keys against a fused kernel's
  // 4, 6 launches against 1), forward and backward, while the norms and SwiGLU stay fused.
  const ModelSpec m = model("llama3-8b");
  const auto [fused, eager] = fused_and_eager(2048, 1);
  LayerWork compiled = fused;
  compiled.kernels = LayerKernels::Compiled;
  const double tokens = 2048, qk = (double(m.heads) + m.kv_heads) * m.head_dim;
  const KernelCost f = layer_forward(m, fused, false), c = layer_forward(m, compiled, false);
  BOOST_TEST(memory_bound(c) - memory_bound(f) == tokens * 16 * qk, tt::tolerance(1e-12));
  BOOST_TEST(c.launches - f.launches == 5);
  BOOST_TEST(c.norm_bytes.value() == f.norm_bytes.value());
  BOOST_TEST(
      memory_bound(layer_backward(m, compiled, false)) - memory_bound(layer_backward(m, fused, false)) ==
          2 * tokens * 16 * qk,
      tt::tolerance(1e-12));
  // A framework's fused kernels (kernels fused) rotate in one pass whatever the model code says.
  BOOST_TEST((fused.rotary == Rotary::Complex));
  // Per-operator selective checkpointing runs the rotation again: the same ops.
  BOOST_TEST(memory_bound(recompute_forward(m, compiled, Recompute::Op, false)) -
                     memory_bound(recompute_forward(m, fused, Recompute::Op, false)) ==
                 tokens * 16 * qk,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(yarn_rope_runs_as_megatron_cores_unfused_ops_under_fused_kernels) {
  // GPT-OSS-120B's YaRN (factor 32) puts an attention factor on cos and sin that Transformer Engine's
  // fused RoPE cannot apply, so Megatron-Core runs _apply_rotary_pos_emb_bshd on the queries and the
  // keys: 12 e bytes an element (against the fused kernel's 2 e) in 12 kernels a tensor (against one
  // kernel for both); its backward 10 e in 5 kernels a tensor (against the fused 4 e in 2).
  const ModelSpec yarn = model("gpt-oss-120b");
  BOOST_TEST(yarn.yarn_factor == 32.0);
  ModelSpec plain = yarn;
  plain.yarn_factor = 1;
  LayerWork w;
  w.seq_len = 4096;
  const double e = 2, qk = 4096.0 * (double(yarn.heads) + yarn.kv_heads) * yarn.head_dim;
  for (const bool moe : {false, true}) {
    LayerWork lw = w;
    lw.ep = moe ? 8 : 1;
    const KernelCost f = layer_forward(yarn, lw, moe), fp = layer_forward(plain, lw, moe);
    BOOST_TEST(f.elementwise_bytes.value() - fp.elementwise_bytes.value() == (12 - 2) * e * qk,
               tt::tolerance(1e-12));
    BOOST_TEST(f.launches - fp.launches == 2 * 12 - 1);
    const KernelCost b = layer_backward(yarn, lw, moe), bp = layer_backward(plain, lw, moe);
    BOOST_TEST(b.elementwise_bytes.value() - bp.elementwise_bytes.value() == (10 - 4) * e * qk,
               tt::tolerance(1e-12));
    BOOST_TEST(b.launches - bp.launches == 2 * 5 - 2);
    BOOST_TEST(f.gemm_flops.value() == fp.gemm_flops.value());
  }
  // Eager PyTorch runs its own rotary embedding, YaRN or not (the factor scales what it multiplies by).
  LayerWork eager = w;
  eager.kernels = LayerKernels::Eager;
  BOOST_TEST(layer_forward(yarn, eager, false).elementwise_bytes.value() ==
             layer_forward(plain, eager, false).elementwise_bytes.value());
}

BOOST_AUTO_TEST_CASE(a_sliding_window_leaves_a_fused_kernel_the_bands_keys_only) {
  // GPT-OSS's windowed layers (sliding_window 128, every layer but each second one): a query at
  // position i attends min(i + 1, 128) keys, which a fused kernel executes; the model FLOPs stay the
  // full square, and unfused attention computes the whole square under its mask.
  const ModelSpec m = model("gpt-oss-120b");
  BOOST_TEST(m.attention_window(0) == 128);
  BOOST_TEST(m.attention_window(1) == 0);
  BOOST_TEST(m.attention_window(34) == 128);
  BOOST_TEST(m.attention_window(35) == 0);
  LayerWork full;
  full.seq_len = 4096;
  LayerWork band = full;
  band.attention_window = 128;
  const double s = 4096, W = 128, heads = m.heads, d = m.head_dim;
  const KernelCost f = attention_core_forward(m, full), b = attention_core_forward(m, band);
  BOOST_TEST(f.flash_forward_flops.value() == 2.0 * heads * s * s * d, tt::tolerance(1e-12));
  const double pairs = W * (W + 1) / 2 + (s - W) * W;
  BOOST_TEST(b.flash_forward_flops.value() == 4.0 * heads * pairs * d, tt::tolerance(1e-12));
  BOOST_TEST(b.attention_flops.value() == f.attention_flops.value());
  BOOST_TEST(b.gemm_flops.value() == f.gemm_flops.value());
  // The backward executes 2.5 times the forward, window or not.
  BOOST_TEST(
      layer_backward(m, band, true).flash_backward_flops.value() == 2.5 * b.flash_forward_flops.value(),
      tt::tolerance(1e-12));
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& dev = dgx.device_of(dgx.pools[0]);
  BOOST_TEST(compute_time(b, dev, Precision::Bf16).value() < compute_time(f, dev, Precision::Bf16).value());
  // A window as long as the sequence is the causal prefix.
  LayerWork wide = full;
  wide.attention_window = 4096;
  BOOST_TEST(attention_core_forward(m, wide).flash_forward_flops.value() == f.flash_forward_flops.value());
  // Unfused attention materialises every score under the mask: no saving.
  LayerWork unfused = full, unfused_band = band;
  unfused.attention = unfused_band.attention = AttentionKind::Unfused;
  BOOST_TEST(attention_core_forward(m, unfused_band).gemm_flops.value() ==
             attention_core_forward(m, unfused).gemm_flops.value());
  BOOST_TEST(attention_core_forward(m, unfused_band).elementwise_bytes.value() ==
             attention_core_forward(m, unfused).elementwise_bytes.value());
  // Under CP's gather the rank's queries are the sequence's last ones: each attends the whole window.
  BOOST_TEST(windowed_keys(1024, 4096, 128) == 1024 * 128.0);
  BOOST_TEST(windowed_keys(4096, 4096, 128) == pairs);
  BOOST_TEST(windowed_keys(8, 8, 1) == 8.0);
}

BOOST_AUTO_TEST_CASE(repeat_kv_copies_the_keys_and_values_out_at_the_query_heads) {
  // torchtitan's repeat_kv (expand, then reshape) before the attention kernel: the keys and the values
  // each read at kv_heads and written at heads, eager or fused; nothing when there is nothing to repeat.
  const ModelSpec gqa = model("llama3-8b"), mha = model("mpt-1b");
  LayerWork w;
  w.seq_len = 2048;
  LayerWork repeat = w;
  repeat.repeat_kv = true;
  const double tokens = 2048, A = double(gqa.heads) * gqa.head_dim, Kv = double(gqa.kv_heads) * gqa.head_dim;
  BOOST_TEST(layer_forward(gqa, repeat, false).elementwise_bytes.value() -
                     layer_forward(gqa, w, false).elementwise_bytes.value() ==
                 2.0 * 2 * tokens * (A + Kv),
             tt::tolerance(1e-12));
  BOOST_TEST(layer_forward(mha, repeat, false).elementwise_bytes.value() ==
             layer_forward(mha, w, false).elementwise_bytes.value());
}

BOOST_AUTO_TEST_CASE(selective_recompute_repeats_the_4_b_s_s_a_attention_core) {
  // QK^T and attention over V: 2 x 2 b s^2 (heads x head_dim) / t; with cp 2 the rank has half the queries.
  const ModelSpec m = model("gpt3-175b");
  LayerWork w;
  w.seq_len = 2048;
  w.tp = 8;
  w.cp = 2;
  w.attention = AttentionKind::Unfused;
  BOOST_TEST(attention_core_forward(m, w).gemm_flops.value() == 4.0 * 1024 * 2048 * 12288 / 8,
             tt::tolerance(1e-12));
  BOOST_TEST(attention_core_forward(m, w).scores_bytes.value() > 0);  // softmax and dropout
  // Its GEMMs are attention's own class, and the layer's only ones of that class.
  BOOST_TEST(attention_core_forward(m, w).attention_flops.value() ==
             attention_core_forward(m, w).gemm_flops.value());
  BOOST_TEST(layer_forward(m, w, false).attention_flops.value() ==
             attention_core_forward(m, w).gemm_flops.value());
}

// ---- optimizer step ----

static TrainingSpec training(OptimizerKind optimizer, Precision precision) {
  TrainingSpec t;
  t.optimizer = optimizer;
  t.precision = precision;
  return t;
}

BOOST_AUTO_TEST_CASE(optimizer_step_moves_every_state_byte_twice_plus_gradient_and_weights) {
  // bf16 AdamW: read the bf16 gradient for the clipping norm (2), read and write master, m, v
  // (2 x 12), read the gradient again (2), write bf16 weights (2).
  BOOST_TEST(optimizer_step(1e9, training(OptimizerKind::AdamW, Precision::Bf16)).optimizer_bytes.value() ==
             30e9);
  // bf16 SGD with momentum: 2 + 2 x 8 + 2 + 2.
  BOOST_TEST(optimizer_step(1e9, training(OptimizerKind::Sgd, Precision::Bf16)).optimizer_bytes.value() ==
             22e9);
  // fp32 Adam: the norm's read (4), read and write weights, m, v (2 x 12), read the gradient (4).
  BOOST_TEST(optimizer_step(1e9, training(OptimizerKind::Adam, Precision::Fp32)).optimizer_bytes.value() ==
             32e9);
  BOOST_TEST(optimizer_step(1e9, training(OptimizerKind::AdamW, Precision::Bf16)).launches == 2);
  BOOST_TEST(optimizer_step(1e9, training(OptimizerKind::AdamW, Precision::Bf16)).gemm_flops.value() == 0);
  // fp16's dynamic loss scale: the gradients (2 bytes) unscaled and checked in one more pass, read and
  // written: 30 + 2 x 2 bytes, one more launch.
  const KernelCost fp16 = optimizer_step(1e9, training(OptimizerKind::AdamW, Precision::Fp16));
  BOOST_TEST(fp16.optimizer_bytes.value() == 34e9);
  BOOST_TEST(fp16.launches == 3);
}
