// Memory model: model states and activations, each formula pinned against published or hand-derived
// numbers.
#define BOOST_TEST_MODULE cost_memory
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

// ---- model states (ZeRO paper, Rajbhandari et al. 2020) ----

BOOST_AUTO_TEST_CASE(sixteen_bit_precisions_take_two_bytes_and_fp32_four) {
  BOOST_TEST(element_bytes(Precision::Bf16) == 2);
  BOOST_TEST(element_bytes(Precision::Fp16) == 2);
  BOOST_TEST(element_bytes(Precision::Fp8) == 2);  // FP8 GEMMs, bf16 weights and activations
  BOOST_TEST(element_bytes(Precision::Tf32) == 4);
  BOOST_TEST(element_bytes(Precision::Fp32) == 4);
}

BOOST_AUTO_TEST_CASE(optimizer_keeps_k_bytes_per_parameter) {
  // Mixed precision: fp32 master + Adam's m and v = 12 (the paper's K); SGD's master + momentum = 8.
  BOOST_TEST(optimizer_bytes_per_parameter(OptimizerKind::AdamW, Precision::Bf16) == 12);
  BOOST_TEST(optimizer_bytes_per_parameter(OptimizerKind::Adam, Precision::Fp16) == 12);
  BOOST_TEST(optimizer_bytes_per_parameter(OptimizerKind::Sgd, Precision::Bf16) == 8);
  // fp32: the weights are the master; only the moments remain.
  BOOST_TEST(optimizer_bytes_per_parameter(OptimizerKind::AdamW, Precision::Fp32) == 8);
  BOOST_TEST(optimizer_bytes_per_parameter(OptimizerKind::Sgd, Precision::Tf32) == 4);
}

BOOST_AUTO_TEST_CASE(zero_stages_reproduce_the_zero_paper_figure_1) {
  // Psi = 7.5B, K = 12, Nd = 64: baseline (2+2+K) Psi = 120 GB; P_os 2Psi + 2Psi + K Psi/Nd = 31.4 GB;
  // P_os+g 2Psi + (2+K) Psi/Nd = 16.6 GB; P_os+g+p (2+2+K) Psi/Nd = 1.9 GB.
  const double psi = 7.5e9;
  auto total = [&](int zero) {
    return model_state_bytes(psi, 64, zero, OptimizerKind::AdamW, Precision::Bf16, 2).total().value();
  };
  BOOST_TEST(total(0) == 120e9, tt::tolerance(1e-12));
  BOOST_TEST(total(1) == 31.40625e9, tt::tolerance(1e-12));
  BOOST_TEST(total(2) == 16.640625e9, tt::tolerance(1e-12));
  BOOST_TEST(total(3) == 1.875e9, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(zero_2_shards_gradients_and_optimizer_but_not_weights) {
  const ModelStateBytes m = model_state_bytes(7.5e9, 64, 2, OptimizerKind::AdamW, Precision::Bf16, 2);
  BOOST_TEST(m.weights.value() == 15e9, tt::tolerance(1e-12));         // 2 Psi
  BOOST_TEST(m.gradients.value() == 15e9 / 64, tt::tolerance(1e-12));  // 2 Psi / Nd
  BOOST_TEST(m.optimizer.value() == 90e9 / 64, tt::tolerance(1e-12));  // 12 Psi / Nd
}

BOOST_AUTO_TEST_CASE(fp32_gradient_reduction_keeps_four_byte_gradients_under_bf16) {
  TrainingSpec t;
  t.precision = Precision::Fp8;
  BOOST_TEST(gradient_bytes(t) == 2);  // bf16 gradients under fp8 GEMMs
  t.precision = Precision::Bf16;
  BOOST_TEST(gradient_bytes(t) == 2);
  const double bf16_step = optimizer_step(1e9, t).optimizer_bytes.value();
  t.grad_reduce = Precision::Fp32;
  BOOST_TEST(gradient_bytes(t) == 4);
  // The clipping norm and the update each read every gradient: 2 more bytes each.
  BOOST_TEST(optimizer_step(1e9, t).optimizer_bytes.value() - bf16_step == 4e9);
  // Megatron-LM's fp32 main_grad under the distributed optimizer: (2 + 4) Psi + 12 Psi / dp.
  const ModelStateBytes m = model_state_bytes(1e9, 8, 1, OptimizerKind::AdamW, Precision::Bf16, 4);
  BOOST_TEST(m.weights.value() == 2e9);
  BOOST_TEST(m.gradients.value() == 4e9);
  BOOST_TEST(m.optimizer.value() == 12e9 / 8);
}

BOOST_AUTO_TEST_CASE(fp32_training_keeps_four_byte_weights_and_gradients) {
  // (4 + 4 + 8) Psi without ZeRO: weights, gradients, Adam's m and v.
  const ModelStateBytes m = model_state_bytes(1e9, 8, 0, OptimizerKind::Adam, Precision::Fp32, 4);
  BOOST_TEST(m.total().value() == 16e9, tt::tolerance(1e-12));
  BOOST_TEST(m.weights.value() == 4e9, tt::tolerance(1e-12));
}

// ---- activations (Korthikanti et al. 2022, table 2), GPT-3 175B: s 2048, b 1, h 12288, a 96, t 8 ----

static double gpt3_layer(Recompute recompute, bool sp) {
  ActivationConfig c;
  c.micro_batch = 1;
  c.seq_len = 2048;
  c.tp = 8;
  c.sequence_parallel = sp;
  c.recompute = recompute;
  c.attention = AttentionKind::Unfused;  // Korthikanti et al. write the scores
  return layer_activation_bytes(model("gpt3-175b"), c, false).value();
}
static constexpr double kSbh = 2048.0 * 12288;  // s b h; 5 a s / (h t) = 5 x 96 x 2048 / 98304 = 10

BOOST_AUTO_TEST_CASE(no_recompute_without_sp_keeps_10_plus_24_over_t_plus_5as_over_ht_sbh) {
  BOOST_TEST(gpt3_layer(Recompute::None, false) == kSbh * (10 + 24.0 / 8 + 10), tt::tolerance(1e-12));
  BOOST_TEST(gpt3_layer(Recompute::None, false) == 578813952.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(no_recompute_with_sp_keeps_34_over_t_plus_5as_over_ht_sbh) {
  BOOST_TEST(gpt3_layer(Recompute::None, true) == kSbh * (34.0 / 8 + 10), tt::tolerance(1e-12));
  BOOST_TEST(gpt3_layer(Recompute::None, true) == 358612992.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(selective_recompute_without_sp_keeps_10_plus_24_over_t_sbh) {
  BOOST_TEST(gpt3_layer(Recompute::Selective, false) == kSbh * (10 + 24.0 / 8), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(selective_recompute_with_sp_keeps_34_sbh_over_t) {
  BOOST_TEST(gpt3_layer(Recompute::Selective, true) == kSbh * 34 / 8, tt::tolerance(1e-12));
  BOOST_TEST(gpt3_layer(Recompute::Selective, true) == 106954752.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(full_recompute_keeps_only_the_2_sbh_layer_input) {
  BOOST_TEST(gpt3_layer(Recompute::Full, false) == 2 * kSbh, tt::tolerance(1e-12));
  BOOST_TEST(gpt3_layer(Recompute::Full, true) == 2 * kSbh / 8, tt::tolerance(1e-12));
}

// Llama 3 8B (GQA 32/8 heads of 128, SwiGLU f = 14336, RMSNorm, no dropout), s 4096, b 1, t 4: s b h,
// the 16-bit softmax output and the fp32 log-sum-exp (inside TP), and the configuration.
static constexpr double kLlamaSbh = 4096.0 * 4096;
static constexpr double kLlamaScores = 2.0 * 32 * 4096 * 4096 / 4, kLlamaLse = 4.0 * 32 * 4096 / 4;
static ActivationConfig llama_tp4(AttentionKind attention) {
  ActivationConfig c;
  c.seq_len = 4096;
  c.tp = 4;
  c.attention = attention;
  return c;
}

// bf16, by the same count as Korthikanti et al., per token, in bytes:
//   outside TP: QKV input 2h, MLP input 2h, two norm inputs 4h, no dropout masks          = 8h
//   inside TP:  Q 2h, K and V 2 x 2 x 1024 = h, projection input 2h, SwiGLU gate, up and
//               product 3 x 2 x 14336 = 21h                                                = 26h
//   scores:     softmax output only (no dropout): 2 a s per token inside TP = 2 x 32 x 4096
// So none/no SP = sbh (8 + 26/4) + 2 a s^2 / 4 = 14.5 sbh + 64 s^2 / 4.
BOOST_AUTO_TEST_CASE(gqa_swiglu_without_dropout_follows_the_hand_count) {
  const ModelSpec m = model("llama3-8b");
  ActivationConfig c = llama_tp4(AttentionKind::Unfused);
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * kLlamaSbh + kLlamaScores,
             tt::tolerance(1e-12));
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 511705088.0, tt::tolerance(1e-12));
  c.sequence_parallel = true;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 34 * kLlamaSbh / 4 + kLlamaScores,
             tt::tolerance(1e-12));
  c.recompute = Recompute::Selective;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 34 * kLlamaSbh / 4, tt::tolerance(1e-12));
  c.recompute = Recompute::Full;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 2 * kLlamaSbh / 4, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(fused_attention_keeps_no_scores_only_a_log_sum_exp_per_query_and_head) {
  // The s x s scores give way to 4 bytes per query and head, inside TP; selective recomputation then
  // has nothing left to drop.
  const ModelSpec m = model("llama3-8b");
  ActivationConfig c = llama_tp4(AttentionKind::Flash2);
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * kLlamaSbh + kLlamaLse,
             tt::tolerance(1e-12));
  c.recompute = Recompute::Selective;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * kLlamaSbh + kLlamaLse,
             tt::tolerance(1e-12));
  BOOST_TEST(recompute_working_bytes(m, c, false).value() == 0);
}

BOOST_AUTO_TEST_CASE(transformer_engine_fp8_keeps_the_gemm_inputs_in_one_byte) {
  // fp8 under Transformer Engine's recipes, per token:
  //   outside TP: norm inputs 4h, QKV and MLP inputs in fp8 1h + 1h                              = 6h
  //   inside TP:  Q 2h, K and V h, the attention output the kernel keeps 2h and the projection's
  //               fp8 copy h, SwiGLU gate and up 2 x 2 x 14336 = 14h, product in fp8 3.5h     = 23.5h
  // Unfused attention keeps no 16-bit output: the projection's fp8 input is its only copy (21.5h).
  // torchao's Float8Linear keeps the bf16 inputs: 8h + 26h / 4 as under bf16.
  const ModelSpec m = model("llama3-8b");
  ActivationConfig c = llama_tp4(AttentionKind::Flash2);
  c.precision = Precision::Fp8;
  BOOST_TEST(keeps_fp8_gemm_inputs(c));
  const double te = (6 + 23.5 / 4) * kLlamaSbh + kLlamaLse;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == te, tt::tolerance(1e-12));
  c.fp8_recipe = Fp8Recipe::TeCurrent;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == te, tt::tolerance(1e-12));
  c.attention = AttentionKind::Unfused;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == (6 + 21.5 / 4) * kLlamaSbh + kLlamaScores,
             tt::tolerance(1e-12));
  c.attention = AttentionKind::Flash2;
  c.fp8_recipe = Fp8Recipe::TorchaoTensorwise;
  BOOST_TEST(!keeps_fp8_gemm_inputs(c));
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * kLlamaSbh + kLlamaLse,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(context_parallelism_divides_a_layers_activations_by_cp) {
  // Tokens per rank s/cp; scores (s/cp) x s, since local queries attend to every key.
  const ModelSpec m = model("llama3-8b");
  ActivationConfig c;
  c.seq_len = 8192;
  const double whole = layer_activation_bytes(m, c, false).value();
  c.cp = 2;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == whole / 2, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(moe_layer_keeps_top_k_expert_activations_and_router_probabilities) {
  // Mixtral 8x7B has Llama 3 8B's layer shape; s 4096, b 1, t 1, selective. Dense: 34 sbh.
  // MoE adds per token: fp32 router probabilities 4 x 8 = 32, top_k = 2 permuted copies 2 x 2h = 16384
  // twice (the experts' input and their outputs, which the combine keeps for the probabilities'
  // gradient) and the second expert's SwiGLU intermediates 3 x 2 x 14336 = 86016:
  //   s b (34h + 32 + 2 x 16384 + 86016) = 4096 x (139264 + 118816)
  const ModelSpec m = model("mixtral-8x7b");
  ActivationConfig c;
  c.seq_len = 4096;
  c.recompute = Recompute::Selective;
  c.attention = AttentionKind::Unfused;
  BOOST_TEST(layer_activation_bytes(m, c, true).value() == 4096.0 * (139264 + 118816), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(head_keeps_16_bit_logits_and_fp32_softmax_over_t) {
  const ModelSpec m = model("gpt3-175b");
  ActivationConfig c;
  c.seq_len = 2048;
  c.tp = 8;
  c.sequence_parallel = true;
  BOOST_TEST(head_activation_bytes(m, c).value() == 2048.0 * 51200 * (2 + 4) / 8, tt::tolerance(1e-12));
  BOOST_TEST(embedding_activation_bytes(m, c).value() == 2 * kSbh / 8, tt::tolerance(1e-12));
}
