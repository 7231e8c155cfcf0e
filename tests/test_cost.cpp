// Cost and memory model: each formula pinned against published or hand-derived numbers.
#define BOOST_TEST_MODULE cost
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

// Llama 3 8B (GQA 32/8 heads of 128, SwiGLU f = 14336, RMSNorm, no dropout), s 4096, b 1, t 4, bf16.
// By the same count as Korthikanti et al., per token, in bytes:
//   outside TP: QKV input 2h, MLP input 2h, two norm inputs 4h, no dropout masks          = 8h
//   inside TP:  Q 2h, K and V 2 x 2 x 1024 = h, projection input 2h, SwiGLU gate, up and
//               product 3 x 2 x 14336 = 21h                                                = 26h
//   scores:     softmax output only (no dropout): 2 a s per token inside TP = 2 x 32 x 4096
// So none/no SP = sbh (8 + 26/4) + 2 a s^2 / 4 = 14.5 sbh + 64 s^2 / 4.
BOOST_AUTO_TEST_CASE(gqa_swiglu_without_dropout_follows_the_hand_count) {
  const ModelSpec m = model("llama3-8b");
  const double sbh = 4096.0 * 4096, scores = 2.0 * 32 * 4096 * 4096 / 4;
  ActivationConfig c;
  c.seq_len = 4096;
  c.tp = 4;
  c.attention = AttentionKind::Unfused;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * sbh + scores, tt::tolerance(1e-12));
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 511705088.0, tt::tolerance(1e-12));
  c.sequence_parallel = true;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 34 * sbh / 4 + scores, tt::tolerance(1e-12));
  c.recompute = Recompute::Selective;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 34 * sbh / 4, tt::tolerance(1e-12));
  c.recompute = Recompute::Full;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 2 * sbh / 4, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(fused_attention_keeps_no_scores_only_a_log_sum_exp_per_query_and_head) {
  // Llama 3 8B as above: the s x s scores give way to 4 bytes per query and head, inside TP; selective
  // recomputation then has nothing left to drop.
  const ModelSpec m = model("llama3-8b");
  const double sbh = 4096.0 * 4096, lse = 4.0 * 32 * 4096 / 4;
  ActivationConfig c;
  c.seq_len = 4096;
  c.tp = 4;
  c.attention = AttentionKind::Flash2;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * sbh + lse, tt::tolerance(1e-12));
  c.recompute = Recompute::Selective;
  BOOST_TEST(layer_activation_bytes(m, c, false).value() == 14.5 * sbh + lse, tt::tolerance(1e-12));
  BOOST_TEST(recompute_working_bytes(m, c, false).value() == 0);
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
  // MoE adds per token: fp32 router probabilities 4 x 8 = 32, top_k = 2 permuted copies 2 x 2h = 16384,
  // and the second expert's SwiGLU intermediates 3 x 2 x 14336 = 86016:
  //   s b (34h + 32 + 16384 + 86016) = 4096 x (139264 + 102432)
  const ModelSpec m = model("mixtral-8x7b");
  ActivationConfig c;
  c.seq_len = 4096;
  c.recompute = Recompute::Selective;
  c.attention = AttentionKind::Unfused;
  BOOST_TEST(layer_activation_bytes(m, c, true).value() == 4096.0 * (139264 + 102432), tt::tolerance(1e-12));
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

// ---- collectives: closed forms, n = 1 GB, p = 8, b = 100 GB/s, alpha = 10 us ----

static const Bytes kGB(1e9);
static const BytesPerSecond k100GBps(100e9);
static const Seconds k10us(10e-6);

BOOST_AUTO_TEST_CASE(ring_allreduce_moves_2_p_minus_1_over_p_of_the_buffer) {
  // 2 x 7 x 10 us + 2 x 7/8 x 1 GB / 100 GB/s = 140 us + 17.5 ms
  BOOST_TEST(ring_allreduce_time(kGB, 8, k100GBps, k10us).value() == 0.01764, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(tree_allreduce_pays_log_p_latency_and_2n_over_b) {
  // 2 x ceil(log2 8) x 10 us + 2 x 1 GB / 100 GB/s = 60 us + 20 ms; ceil(log2 5) = 3 as well.
  BOOST_TEST(tree_allreduce_time(kGB, 8, k100GBps, k10us).value() == 0.02006, tt::tolerance(1e-12));
  BOOST_TEST(tree_allreduce_time(kGB, 5, k100GBps, k10us).value() == 0.02006, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(all_gather_reduce_scatter_and_all_to_all_move_p_minus_1_over_p) {
  // 7 x 10 us + 7/8 x 1 GB / 100 GB/s = 70 us + 8.75 ms
  BOOST_TEST(ring_gather_time(kGB, 8, k100GBps, k10us).value() == 0.00882, tt::tolerance(1e-12));
  BOOST_TEST(alltoall_time(kGB, 8, k100GBps, k10us).value() == 0.00882, tt::tolerance(1e-12));
  // Chain broadcast: 70 us + 10 ms.
  BOOST_TEST(broadcast_time(kGB, 8, k100GBps, k10us).value() == 0.01007, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(one_rank_communicates_for_free) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  BOOST_TEST(ring_allreduce_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(tree_allreduce_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(ring_gather_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(alltoall_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(broadcast_time(kGB, 1, k100GBps, k10us).value() == 0);
  BOOST_TEST(collective_time(CollectiveKind::AllReduce, kGB, {1, 1, false}, dgx.pools[0], dgx).time.value() ==
             0);
}

// ---- collective_time on the catalog's clusters ----

// The cluster without its measured busbw curves: the alpha-beta algorithms alone.
static ClusterSpec alpha_beta(const std::string& name) {
  ClusterSpec c = cluster(name);
  for (PoolSpec& p : c.pools)
    p.intra_node.all_reduce_curve = p.intra_node.all_gather_curve = p.intra_node.reduce_scatter_curve =
        std::nullopt;
  return c;
}

BOOST_AUTO_TEST_CASE(group_inside_a_node_follows_the_measured_curve_at_its_size) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  auto time = [&](CollectiveKind k, double n, int p) {
    return collective_time(k, Bytes(n), {p, p, false}, dgx.pools[0], dgx).time.value();
  };
  // At a measured size: 1 GiB x 2 x 7/8 / 228.10 GB/s (Azure's 8x A100 nccl-tests curve).
  const double GiB = 1024.0 * 1024 * 1024;
  BOOST_TEST(time(CollectiveKind::AllReduce, GiB, 8) == GiB * 1.75 / 228.10e9, tt::tolerance(1e-12));
  // Between two sizes busbw moves on log-log axes: 48 MiB lies half-way (in log size) from 32 to 64 MiB
  // only as 1.585 of 2, so its busbw is 132.77 x (166.63 / 132.77)^0.585.
  const double MiB = 1024.0 * 1024, x = std::log(1.5) / std::log(2.0);
  const double busbw = 132.77e9 * std::pow(166.63 / 132.77, x);
  BOOST_TEST(time(CollectiveKind::AllReduce, 48 * MiB, 8) == 48 * MiB * 1.75 / busbw, tt::tolerance(1e-9));
  // Small messages are latency-bound: below 32 KiB the time stays the 32 KiB point's.
  BOOST_TEST(time(CollectiveKind::AllReduce, 1024, 8) == time(CollectiveKind::AllReduce, 32 * 1024, 8));
  // Mid-size messages reach well under the large-message busbw the alpha-beta form takes for all:
  // 109 GB/s at 16 MiB, 1.7x the alpha-beta time.
  BOOST_TEST(time(CollectiveKind::AllReduce, 16 * MiB, 8) > 1.6 * (28e-6 + 16 * MiB * 1.75 / 230e9));
  // An all-gather without a curve of its own takes the all-reduce curve's busbw at its size.
  BOOST_TEST(time(CollectiveKind::AllGather, GiB, 8) == GiB * 7 / 8 / 228.10e9, tt::tolerance(1e-12));
  // H100 has its own all-gather curve (ring: 344.57 GB/s at 1 GiB) beside NVLink SHARP's all-reduce.
  const ClusterSpec h100 = cluster("dgx-h100");
  BOOST_TEST(collective_time(CollectiveKind::AllGather, Bytes(GiB), {8, 8, false}, h100.pools[0], h100)
                     .time.value() == GiB * 7 / 8 / 344.57e9,
             tt::tolerance(1e-12));
  BOOST_TEST(collective_time(CollectiveKind::AllReduce, Bytes(GiB), {8, 8, false}, h100.pools[0], h100)
                     .time.value() == GiB * 1.75 / 466.91e9,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(group_inside_a_node_uses_the_measured_intra_node_busbw) {
  // DGX A100 without curves: 8 GPUs, all-reduce busbw 230 GB/s, 2 us: 2 x 7 x 2 us + 1.75 x 1 GB / 230 GB/s.
  const ClusterSpec dgx = alpha_beta("dgx-a100-80g");
  const CollectiveCost c = collective_time(CollectiveKind::AllReduce, kGB, {8, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(c.time.value() == 28e-6 + 1.75 / 230, tt::tolerance(1e-12));
  BOOST_TEST((c.algorithm == Algorithm::Ring));
}

BOOST_AUTO_TEST_CASE(nvlink_sharp_reduces_in_the_switch_when_faster) {
  // H100 node: ring 28 us + 1.75 GB / 370 GB/s = 4.76 ms; SHARP 2 x 2 us + 1 GB / 370 GB/s = 2.71 ms.
  const ClusterSpec roce = alpha_beta("h100-roce");
  const CollectiveCost c =
      collective_time(CollectiveKind::AllReduce, kGB, {8, 8, false}, roce.pools[0], roce);
  BOOST_TEST(c.time.value() == 4e-6 + 1.0 / 370, tt::tolerance(1e-12));
  BOOST_TEST((c.algorithm == Algorithm::Sharp));
}

BOOST_AUTO_TEST_CASE(one_member_per_node_uses_a_gpus_share_of_the_nics) {
  // DGX A100: 8 NICs x 24 GB/s achievable / 8 GPUs = 24 GB/s; alpha = 2 us NIC + 2 x 1 us switch.
  // 16 nodes, 1 GB: ring 2 x 15 x 4 us + 2 x 15/16 GB / 24 GB/s = 78.245 ms beats tree 83.365 ms.
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const CollectiveCost big =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, false}, dgx.pools[0], dgx);
  BOOST_TEST(big.time.value() == 0.078245, tt::tolerance(1e-12));
  BOOST_TEST((big.algorithm == Algorithm::Ring));
  // 1 kB: tree 2 x 4 x 4 us + 2 kB / 24 GB/s = 32.08 us beats ring's 120 us of latency.
  const CollectiveCost small =
      collective_time(CollectiveKind::AllReduce, Bytes(1e3), {16, 1, false}, dgx.pools[0], dgx);
  BOOST_TEST(small.time.value() == 32e-6 + 2e3 / 24e9, tt::tolerance(1e-12));
  BOOST_TEST((small.algorithm == Algorithm::Tree));
}

BOOST_AUTO_TEST_CASE(hierarchical_all_gather_wins_on_latency_and_flat_ring_on_bandwidth) {
  // 16 DGX A100 nodes x 8 members. Flat ring: 127 steps of 4 us, bandwidth min(230, 8 x 24) = 192 GB/s.
  // Hierarchical: across 16 nodes on n/8 at 24 GB/s, then inside the node at 230 GB/s, 2 us.
  const ClusterSpec dgx = alpha_beta("dgx-a100-80g");
  auto flat = [](double n) { return 127 * 4e-6 + 127.0 / 128 * n / 192e9; };
  auto hier = [](double n) { return 15 * 4e-6 + 15.0 / 16 * n / 8 / 24e9 + 7 * 2e-6 + 7.0 / 8 * n / 230e9; };
  const CollectiveCost mid =
      collective_time(CollectiveKind::AllGather, Bytes(64e6), {128, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(mid.time.value() == hier(64e6), tt::tolerance(1e-12));  // 0.630 ms against 0.839 ms
  BOOST_TEST((mid.algorithm == Algorithm::Hierarchical));
  const CollectiveCost big =
      collective_time(CollectiveKind::AllGather, Bytes(8e9), {128, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(big.time.value() == flat(8e9), tt::tolerance(1e-12));  // 41.8 ms against 69.6 ms
  BOOST_TEST((big.algorithm == Algorithm::Ring));
}

BOOST_AUTO_TEST_CASE(crossing_pods_divides_nic_bandwidth_by_the_oversubscription) {
  // h100-roce: 8 x 48 GB/s / 8 = 48 GB/s per GPU, 7:1 above the pods; alpha 3 us + 2 x 1 us.
  const ClusterSpec roce = cluster("h100-roce");
  const Seconds alpha(5e-6);
  const CollectiveCost inside =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, false}, roce.pools[0], roce);
  const CollectiveCost across =
      collective_time(CollectiveKind::AllReduce, kGB, {16, 1, true}, roce.pools[0], roce);
  BOOST_TEST(inside.time.value() == ring_allreduce_time(kGB, 16, BytesPerSecond(48e9), alpha).value(),
             tt::tolerance(1e-12));
  BOOST_TEST(across.time.value() == ring_allreduce_time(kGB, 16, BytesPerSecond(48e9 / 7), alpha).value(),
             tt::tolerance(1e-12));
  BOOST_TEST(across.time.value() == 0.2735875, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(all_to_all_across_nodes_sends_only_the_remote_share_through_the_nics) {
  // 16 ranks on 2 DGX A100 nodes: 8/16 of n leaves through 24 GB/s while 7/16 crosses NVSwitch.
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const CollectiveCost c = collective_time(CollectiveKind::AllToAll, kGB, {16, 8, false}, dgx.pools[0], dgx);
  BOOST_TEST(c.time.value() == 15 * 4e-6 + 0.5 / 24, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(point_to_point_uses_the_fabric_inside_a_node_and_a_nic_share_across) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  BOOST_TEST(p2p_time(kGB, true, dgx.pools[0], dgx).value() == 2e-6 + 1.0 / 300, tt::tolerance(1e-12));
  BOOST_TEST(p2p_time(kGB, false, dgx.pools[0], dgx).value() == 4e-6 + 1.0 / 24, tt::tolerance(1e-12));
}

// ---- compute_time on an A100: 312 TFLOP/s x 0.87, 108 SMs, 2039 GB/s x 0.83, 5 us per launch ----

// One launch of an M x K by K x N GEMM.
static KernelCost one_gemm(double m, double k, double n) {
  KernelCost c;
  c.gemm_flops = Flops(2 * m * n * k);
  c.gemms.add(Gemm{m, n, k});
  c.launches = 1;
  return c;
}

BOOST_AUTO_TEST_CASE(large_gemm_is_compute_bound_at_peak_times_gemm_efficiency_and_its_waves) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const DeviceSpec& a100 = dgx.device_of(dgx.pools[0]);
  // 8192^3: 64 x 32 tiles of 128 x 256 (or 32 x 64 of 256 x 128) = 2048 tiles in 19 waves of 108 SMs:
  // 2048 / 2052 of the waves do work.
  const Gemm g{8192, 8192, 8192};
  BOOST_TEST(wave_efficiency(g, 108) == 2048.0 / (19 * 108), tt::tolerance(1e-12));
  const double math = 2.0 * 8192 * 8192 * 8192 / (312e12 * a100.efficiency.gemm * 2048 / (19 * 108));
  BOOST_TEST(compute_time(one_gemm(8192, 8192, 8192), a100, Precision::Bf16).value() == math + 5e-6,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_gemm_that_fills_one_wave_and_a_tile_more_loses_the_second_wave) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const DeviceSpec& a100 = dgx.device_of(dgx.pools[0]);
  // 128 x 128 tiles: 12 x 9 = 108 fill one wave; one row more needs a second wave for 9 tiles, and no
  // other tile shape does better (1,664 rows over 128 x 64 tiles: 13 x 18 = 234 in 3 waves).
  const double fits = wave_efficiency(Gemm{1536, 1152, 4096}, 108);
  const double spills = wave_efficiency(Gemm{1664, 1152, 4096}, 108);
  BOOST_TEST(fits == 1.0);
  BOOST_TEST(spills < 0.75);
  // So it takes far longer per FLOP, though it has 8% more of them.
  const double t_fits = compute_time(one_gemm(1536, 4096, 1152), a100, Precision::Bf16).value();
  const double t_spills = compute_time(one_gemm(1664, 4096, 1152), a100, Precision::Bf16).value();
  BOOST_TEST(t_spills / t_fits > 1.3);
  // A CPU (no SMs) has no waves.
  BOOST_TEST(wave_efficiency(Gemm{1664, 1152, 4096}, 0) == 1.0);
}

BOOST_AUTO_TEST_CASE(tiny_gemm_is_bound_by_launch_and_memory) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  // 256 batched 64^3 products: 256 tiles of 128 x 64, half idle, in 3 waves take 1.3 us of math; their
  // 3 x 64^2 x 2 B x 256 = 6.3 MB of traffic take 3.7 us.
  KernelCost batched;
  batched.gemms.add(Gemm{64, 64, 64, 256});
  batched.launches = 1;
  const DeviceSpec& a100 = dgx.device_of(dgx.pools[0]);
  const double math = 2.0 * 64 * 64 * 64 * 256 /
                      (312e12 * a100.efficiency.gemm * wave_efficiency(Gemm{64, 64, 64, 256}, 108));
  const double memory = 256 * 3 * 64 * 64 * 2 / (2039e9 * 0.83);
  BOOST_TEST(compute_time(batched, a100, Precision::Bf16).value() == std::max(math, memory) + 5e-6,
             tt::tolerance(1e-12));
  // One small GEMM: 24,576 B = 15 ns of traffic and less math, 5 us of launch.
  // Its one tile of 128 x 64 runs on one SM of 108: 0.4 us.
  const double t = compute_time(one_gemm(64, 64, 64), a100, Precision::Bf16).value();
  BOOST_TEST(t == 5e-6 + 2.0 * 128 * 64 * 64 / (312e12 * a100.efficiency.gemm / 108), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(norms_run_at_the_devices_norm_share_of_the_bandwidth) {
  // LayerNorm and RMSNorm kernels reach less of the bandwidth than elementwise ones (torch's kernels:
  // 0.60 on an H100 against BabelStream's 0.89); a device without the figure runs them at `memory`.
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools[0]);
  BOOST_REQUIRE(h100.efficiency.norm.has_value());
  BOOST_TEST(*h100.efficiency.norm < h100.efficiency.memory);
  BOOST_TEST(compute_time(norm_kernel(1e9), h100, Precision::Bf16).value() ==
                 1e9 / (3350e9 * *h100.efficiency.norm) + 5e-6,
             tt::tolerance(1e-12));
  DeviceSpec plain = h100;
  plain.efficiency.norm.reset();
  BOOST_TEST(compute_time(norm_kernel(1e9), plain, Precision::Bf16).value() ==
                 compute_time(memory_bound_kernels(1e9), plain, Precision::Bf16).value(),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(eager_pytorchs_composite_rmsnorm_runs_at_the_devices_eager_norm_share) {
  // Eager PyTorch composes RMSNorm from ATen's casts, pow, mean and broadcast products: 36 bytes an
  // element in bf16 forward, twice that backward, at the share measured for that composite (0.51 of an
  // A100's bandwidth against BabelStream's 0.83); a fused RMSNorm is one norm kernel.
  const ModelSpec m = model("llama3-8b");
  LayerWork eager;
  eager.seq_len = 4096;
  eager.kernels = LayerKernels::Eager;
  LayerWork fused = eager;
  fused.kernels = LayerKernels::Fused;
  const double elements = 4096.0 * m.hidden, per_layer = 2 * 36 * elements;  // two norms a layer
  BOOST_TEST(layer_forward(m, eager, false).eager_norm_bytes.value() == per_layer, tt::tolerance(1e-12));
  BOOST_TEST(layer_backward(m, eager, false).eager_norm_bytes.value() == 2 * per_layer, tt::tolerance(1e-12));
  BOOST_TEST(layer_forward(m, fused, false).eager_norm_bytes.value() == 0);
  BOOST_TEST(layer_forward(m, fused, false).norm_bytes.value() == 2 * 2 * 2 * elements, tt::tolerance(1e-12));
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const DeviceSpec& a100 = dgx.device_of(dgx.pools[0]);
  BOOST_REQUIRE(a100.efficiency.eager_norm.has_value());
  BOOST_TEST(*a100.efficiency.eager_norm < a100.efficiency.memory);
  BOOST_TEST(compute_time(eager_norm_kernels(1e9, 8), a100, Precision::Bf16).value() ==
                 1e9 / (2039e9 * *a100.efficiency.eager_norm) + 8 * 5e-6,
             tt::tolerance(1e-12));
  DeviceSpec plain = a100;
  plain.efficiency.eager_norm.reset();
  BOOST_TEST(compute_time(eager_norm_kernels(1e9, 8), plain, Precision::Bf16).value() ==
                 compute_time(memory_bound_kernels(1e9, 8), plain, Precision::Bf16).value(),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_gated_activation_over_one_gemms_halves_runs_at_the_gated_share) {
  // Megatron-Core's fc1 is the gate and up projections in one GEMM: SwiGLU reads its output's two
  // halves in strided rows (efficiency.gated, 0.56 of an H100 measured); separate projections
  // (torchtitan's w1, w3) give it whole tensors (efficiency.memory).
  const ModelSpec m = model("llama3-8b");
  LayerWork fused;
  fused.seq_len = 4096;
  LayerWork separate = fused;
  separate.projections = Projections::Separate;
  const double bytes = 3 * 2 * 4096.0 * m.ffn_hidden;
  BOOST_TEST(layer_forward(m, fused, false).gated_bytes.value() == bytes, tt::tolerance(1e-12));
  BOOST_TEST(layer_forward(m, separate, false).gated_bytes.value() == 0);
  BOOST_TEST(layer_backward(m, fused, false).gated_bytes.value() == 2 * bytes, tt::tolerance(1e-12));
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools[0]);
  BOOST_REQUIRE(h100.efficiency.gated.has_value());
  BOOST_TEST(compute_time(gated_kernels(1e9), h100, Precision::Bf16).value() ==
                 1e9 / (3350e9 * *h100.efficiency.gated) + 5e-6,
             tt::tolerance(1e-12));
  // GELU has no gate: one tensor in, one out.
  const ModelSpec gpt = model("gpt3-1.7b");
  BOOST_TEST(layer_forward(gpt, fused, false).gated_bytes.value() == 0);
}

BOOST_AUTO_TEST_CASE(a_gemms_tiles_pay_two_k_steps_outside_their_main_loop_on_h100) {
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools[0]);
  BOOST_TEST(h100.efficiency.gemm_tile_k_steps == 2.0);
  // 16-bit operands: a main-loop step covers 64 of K, so a tile spends 128 of K outside it.
  const Gemm k2048{4096, 4096, 2048}, k8192{4096, 4096, 8192};
  BOOST_TEST(gemm_k_share(k2048, h100, Precision::Bf16) == 2048.0 / (2048 + 128), tt::tolerance(1e-12));
  // Same tiles and waves, 4x the K: the short GEMM runs at (2048 / 2176) / (8192 / 8320) of the long
  // one's rate per FLOP.
  const double per_flop_short = gemm_time(k2048, h100, Precision::Bf16).value() / k2048.flops(),
               per_flop_long = gemm_time(k8192, h100, Precision::Bf16).value() / k8192.flops();
  BOOST_TEST(per_flop_short / per_flop_long == (8192.0 / 8320) / (2048.0 / 2176), tt::tolerance(1e-9));
  // fp8 operands: a step covers 128 of K (its bytes), so the fixed part is 256 of K; a GEMM that stays
  // in 16 bits under fp8 training (the output layer) keeps 128.
  BOOST_TEST(gemm_k_share(k2048, h100, Precision::Fp8) == 2048.0 / (2048 + 256), tt::tolerance(1e-12));
  Gemm head = k2048;
  head.fp8 = false;
  BOOST_TEST(gemm_k_share(head, h100, Precision::Fp8) == 2048.0 / (2048 + 128), tt::tolerance(1e-12));
  // The measured GEMMs the shares come from come back within 1%: bf16 8192^3 on random data at the
  // A100's sustained rate times gpu-fryer's H100 / A100 ratio (730 / 270 TFLOP/s, one tool run the
  // same way on both), and Azure's sustained fp8 4096^3 (1216.9 TFLOP/s, launch included).
  const ClusterSpec a100 = cluster("dgx-a100-80g");
  const auto rate_8192 = [](const DeviceSpec& device) {
    return 2.0 * 8192 * 8192 * 8192 / gemm_time(Gemm{8192, 8192, 8192}, device, Precision::Bf16).value();
  };
  BOOST_TEST(rate_8192(h100) / (rate_8192(a100.device_of(a100.pools[0])) * 730 / 270) == 1.0,
             tt::tolerance(0.01));
  const double fp8_s = compute_time(one_gemm(4096, 4096, 4096), h100, Precision::Fp8).value();
  BOOST_TEST(2.0 * 4096 * 4096 * 4096 / fp8_s / 1216.9e12 == 1.0, tt::tolerance(0.01));
  // A device file without the figure (A100's) has no K share.
  BOOST_TEST(gemm_k_share(k2048, a100.device_of(a100.pools[0]), Precision::Bf16) == 1.0);
}

BOOST_AUTO_TEST_CASE(elementwise_traffic_runs_at_memory_bandwidth_times_efficiency) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  KernelCost copy;
  copy.elementwise_bytes = kGB;
  BOOST_TEST(compute_time(copy, dgx.device_of(dgx.pools[0]), Precision::Bf16).value() == 1 / (2039.0 * 0.83),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(kernel_costs_add_and_repeat_per_layer) {
  KernelCost c = one_gemm(4, 8, 2);
  c.attention_flops = Flops(0.5);
  c.elementwise_bytes = Bytes(5);
  c += c;
  const KernelCost layers = c * 3;
  BOOST_TEST(layers.gemm_flops.value() == 6 * 2 * 4 * 8 * 2);
  BOOST_TEST(layers.attention_flops.value() == 3);
  BOOST_TEST(layers.elementwise_bytes.value() == 30);
  BOOST_TEST(layers.launches == 6);
  // One shape, launched six times; the copies of `c` share their list of shapes.
  BOOST_TEST(layers.gemms.size() == 1u);
  BOOST_TEST(layers.gemms.begin()->count == 6);
  BOOST_TEST(c.gemms.begin()->count == 2);
}

BOOST_AUTO_TEST_CASE(fused_attention_runs_at_its_kernels_measured_rate) {
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  const ModelSpec m = model("llama3-8b");
  LayerWork w;
  w.seq_len = 8192;
  w.attention = AttentionKind::Flash2;
  const KernelCost f2 = attention_core_forward(m, w);
  // A causal mask halves the square: 2 x 2 b a s^2 d / 2.
  BOOST_TEST(f2.flash_forward_flops.value() == 2.0 * 32 * 8192.0 * 8192 * 128, tt::tolerance(1e-12));
  BOOST_TEST(f2.gemm_flops.value() == 2 * f2.flash_forward_flops.value(), tt::tolerance(1e-12));
  BOOST_TEST(compute_time(f2, d, Precision::Bf16).value() ==
                 f2.flash_forward_flops.value() / (989e12 * 0.287) + 5e-6,
             tt::tolerance(1e-9));
  // FlashAttention 3 on the same H100 is faster; `flash` takes the newest kernel the device has.
  w.attention = AttentionKind::Flash3;
  const double t3 = compute_time(attention_core_forward(m, w), d, Precision::Bf16).value();
  w.attention = AttentionKind::Flash;
  BOOST_TEST(compute_time(attention_core_forward(m, w), d, Precision::Bf16).value() == t3);
  BOOST_TEST(t3 < compute_time(f2, d, Precision::Bf16).value() / 2);
  // The backward recomputes the scores: 2.5x the forward's FLOPs, at the backward's rate.
  w.attention = AttentionKind::Flash2;
  const KernelCost b = layer_backward(m, w, false);
  BOOST_TEST(b.flash_backward_flops.value() == 2.5 * f2.flash_forward_flops.value(), tt::tolerance(1e-12));
  // Under fp8 training the attention kernel stays at the 16-bit peak.
  BOOST_TEST(compute_time(f2, d, Precision::Fp8).value() == compute_time(f2, d, Precision::Bf16).value());
}

BOOST_AUTO_TEST_CASE(unfused_attentions_kernels_over_the_scores_run_at_their_own_share) {
  // The softmax reads and writes each score (2 e bytes), dropout reads it and writes it with its 1-byte
  // mask; the backward twice the forward's. Where the device has no `scores` share they run at `memory`.
  ModelSpec m = model("llama3-8b");
  m.dropout = true;
  LayerWork w;
  w.seq_len = 2048;
  w.attention = AttentionKind::Unfused;
  const double scores = 32 * 2048.0 * 2048;
  const KernelCost f = attention_core_forward(m, w);
  BOOST_TEST(f.scores_bytes.value() == (2 * 2 + 2 * 2 + 1) * scores, tt::tolerance(1e-12));
  BOOST_TEST(f.elementwise_bytes.value() == 0);
  BOOST_TEST(layer_backward(m, w, false).scores_bytes.value() == 2 * f.scores_bytes.value(),
             tt::tolerance(1e-12));
  BOOST_TEST(layer_forward(m, w, false).memory_bound_bytes().value() > f.scores_bytes.value());
  const ClusterSpec a100 = cluster("dgx-a100-80g");
  DeviceSpec d = a100.device_of(a100.pools[0]);
  BOOST_REQUIRE(!d.efficiency.scores.has_value());
  KernelCost only = f;
  only.gemms = {}, only.gemm_flops = only.attention_flops = Flops(0), only.gemm_bytes = Bytes(0),
  only.launches = 0;
  const double at_memory = compute_time(only, d, Precision::Bf16).value();
  BOOST_TEST(at_memory == f.scores_bytes.value() / (d.memory_bandwidth.value() * d.efficiency.memory),
             tt::tolerance(1e-12));
  d.efficiency.scores = d.efficiency.memory / 2;
  BOOST_TEST(compute_time(only, d, Precision::Bf16).value() == 2 * at_memory, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(fused_attention_pads_a_head_to_the_kernels_compiled_size) {
  BOOST_TEST(flash_kernel_head_dim(false, 80) == 96);
  BOOST_TEST(flash_kernel_head_dim(false, 128) == 128);
  BOOST_TEST(flash_kernel_head_dim(false, 160) == 160);
  BOOST_TEST(flash_kernel_head_dim(true, 160) == 192);  // FlashAttention 3 has no 160-wide kernel
  BOOST_TEST(flash_kernel_head_dim(true, 32) == 64);
  BOOST_TEST(flash_kernel_head_dim(true, 320) == 320);
  // The same heads at 112 wide cost what they cost at 128 (the kernel pads), though the model counts
  // 112 / 128 of the FLOPs; unfused attention's GEMMs pay for 112 only.
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  ModelSpec narrow = model("llama3-8b"), wide = narrow;
  narrow.head_dim = 112;
  LayerWork w;
  w.seq_len = 8192;
  for (AttentionKind kind : {AttentionKind::Flash2, AttentionKind::Flash3}) {
    w.attention = kind;
    const KernelCost n = attention_core_forward(narrow, w), x = attention_core_forward(wide, w);
    BOOST_TEST(n.gemm_flops.value() == x.gemm_flops.value() * 112 / 128, tt::tolerance(1e-12));
    BOOST_TEST(compute_time(n, d, Precision::Bf16).value() == compute_time(x, d, Precision::Bf16).value(),
               tt::tolerance(1e-12));
    BOOST_TEST(layer_backward(narrow, w, false).fused_head_dim == 112);  // the backward kernel pads alike
    KernelCost two = n;
    two += n;  // the padding survives adding up kernel groups
    BOOST_TEST(
        compute_time(two, d, Precision::Bf16).value() == 2 * compute_time(x, d, Precision::Bf16).value(),
        tt::tolerance(1e-9));
  }
}

BOOST_AUTO_TEST_CASE(fused_attention_rates_interpolate_in_log_length_and_hold_outside_the_table) {
  EfficiencySpec::FusedAttention k;
  k.forward = 0.3, k.backward = 0.4, k.backward_full = 0.5, k.seq_len = 8192;
  k.by_seq_len[2048] = {0.2, 0.2, {}, {}};
  k.by_seq_len[1024] = {0.1, 0.1, {}, 0.3};
  // The figures at seq_len come back unchanged there, above it and where the length is unknown.
  for (double length : {8192.0, 16384.0, 0.0}) {
    const EfficiencySpec::FusedRates r = fused_rates_at(k, length);
    BOOST_TEST(r.forward == 0.3);
    BOOST_TEST(r.backward == 0.4);
    BOOST_TEST(!r.forward_full.has_value());  // absent at seq_len: the causal figure stands in
    BOOST_TEST(*r.backward_full == 0.5);
  }
  // 4096 lies halfway between 2048 and 8192 in log(length).
  BOOST_TEST(fused_rates_at(k, 4096).forward == 0.25, tt::tolerance(1e-12));
  BOOST_TEST(fused_rates_at(k, 2048).forward == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(fused_rates_at(k, 2048 * std::sqrt(2.0)).backward == 0.25, tt::tolerance(1e-12));
  // Below the shortest length listed: its figures. A rate uses only the lengths that list it.
  BOOST_TEST(fused_rates_at(k, 512).forward == 0.1);
  BOOST_TEST(*fused_rates_at(k, 512).backward_full == 0.3);
  BOOST_TEST(*fused_rates_at(k, 2048).backward_full == 0.3 + 0.2 * 1.0 / 3, tt::tolerance(1e-12));
  // A kernel without a table: the same figures at every length.
  EfficiencySpec::FusedAttention flat = k;
  flat.by_seq_len.clear();
  BOOST_TEST(fused_rates_at(flat, 512).forward == 0.3);
}

BOOST_AUTO_TEST_CASE(a_shorter_sequence_costs_fused_attention_more_per_flop) {
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  const ModelSpec m = model("llama3-8b");
  // The catalog's figures at seqlen 8192 are those the device file measured there.
  for (const auto& kernel : {d.efficiency.flash2, d.efficiency.flash3}) {
    BOOST_TEST_REQUIRE(kernel.has_value());
    BOOST_TEST(kernel->seq_len == 8192);
    BOOST_TEST(!kernel->by_seq_len.empty());
    const EfficiencySpec::FusedRates at = fused_rates_at(*kernel, 8192);
    BOOST_TEST(at.forward == kernel->forward);
    BOOST_TEST(at.backward == kernel->backward);
    BOOST_TEST(*at.forward_full == *kernel->forward_full);
    BOOST_TEST(*at.backward_full == *kernel->backward_full);
  }
  for (AttentionKind kind : {AttentionKind::Flash2, AttentionKind::Flash3}) {
    double previous = 0;  // seconds per executed FLOP, forward and backward
    for (int s : {16384, 8192, 4096, 2048, 1024}) {
      LayerWork w;
      w.seq_len = s;
      w.micro_batch = 16384 / std::min(s, 16384);
      w.attention = kind;
      const KernelCost f = attention_core_forward(m, w), b = layer_backward(m, w, false);
      BOOST_TEST(f.fused_key_length == s);
      BOOST_TEST(b.fused_key_length == s);
      const double per_flop =
          (compute_time(f, d, Precision::Bf16).value() - 5e-6) / f.flash_forward_flops.value();
      BOOST_TEST(per_flop >= previous);
      if (s < 8192) BOOST_TEST(per_flop > previous);
      previous = per_flop;
      // The search's bound charges fused attention as compute_time does.
      BOOST_TEST(compute_time_bound(f, d, Precision::Bf16).value() ==
                 compute_time(f, d, Precision::Bf16).value());
    }
  }
}

BOOST_AUTO_TEST_CASE(unfused_attention_writes_the_scores_and_costs_more_than_flash_at_long_sequences) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const DeviceSpec& d = dgx.device_of(dgx.pools[0]);
  const ModelSpec m = model("gpt3-175b");
  LayerWork w;
  w.seq_len = 8192;
  w.tp = 8;
  w.attention = AttentionKind::Unfused;
  const KernelCost unfused = attention_core_forward(m, w);
  BOOST_TEST(unfused.scores_bytes.value() > 0);  // softmax and dropout over the s x s scores
  BOOST_TEST(unfused.gemms.size() == 2u);        // QK^T and softmax(.) V, batched over heads
  w.attention = AttentionKind::Flash2;
  const KernelCost flash = attention_core_forward(m, w);
  BOOST_TEST(flash.elementwise_bytes.value() == 0);
  BOOST_TEST(compute_time(unfused, d, Precision::Bf16).value() >
             compute_time(flash, d, Precision::Bf16).value());
  // Both count the same model FLOPs (MFU's numerator).
  BOOST_TEST(unfused.gemm_flops.value() == flash.gemm_flops.value(), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(alibi_writes_its_bias_into_the_unfused_scores_forward_only) {
  // BLOOM's Megatron-DeepSpeed: baddbmm's broadcast input copied into the scores, read back by the GEMM.
  ModelSpec alibi = model("bloom-176b"), learned = alibi;
  learned.position = PositionKind::Learned;
  BOOST_TEST((alibi.position == PositionKind::Alibi));
  LayerWork w;
  w.seq_len = 2048;
  w.micro_batch = 2;
  w.tp = 4;
  w.attention = AttentionKind::Unfused;
  const double scores = 2.0 * (112 / 4) * 2048 * 2048;
  BOOST_TEST(layer_forward(alibi, w, false).memory_bound_bytes().value() -
                     layer_forward(learned, w, false).memory_bound_bytes().value() ==
                 2 * 2 * scores,
             tt::tolerance(1e-9));
  // The bias takes no gradient: the backward is the learned model's.
  BOOST_TEST(layer_backward(alibi, w, false).memory_bound_bytes().value() ==
                 layer_backward(learned, w, false).memory_bound_bytes().value(),
             tt::tolerance(1e-12));
  BOOST_TEST(layer_backward(alibi, w, false).launches == layer_backward(learned, w, false).launches);
  // Fused kernels add it in registers.
  w.attention = AttentionKind::Flash2;
  BOOST_TEST(layer_forward(alibi, w, false).elementwise_bytes.value() ==
             layer_forward(learned, w, false).elementwise_bytes.value());
}

BOOST_AUTO_TEST_CASE(backward_gemms_are_the_input_and_weight_gradients_of_each_forward_gemm) {
  // For C = A B: dA = dC B^T and dB = A^T dC.
  const ModelSpec m = model("gpt3-1.7b");
  LayerWork w;
  w.seq_len = 2048;
  const KernelCost b = layer_backward(m, w, false);
  const KernelCost fw = layer_forward(m, w, false);
  BOOST_TEST(b.gemm_flops.value() == 2 * fw.gemm_flops.value(), tt::tolerance(1e-12));
  double listed = 0;
  for (const Gemm& g : b.gemms) listed += g.flops();
  // Fused attention is no GEMM: the listed shapes are the rest of the FLOPs.
  BOOST_TEST(listed == (b.gemm_flops - b.attention_flops).value(), tt::tolerance(1e-12));
  // The QKV projection (2048 x 2304 by 2304 x 6912) appears as its two gradients.
  bool input_gradient = false, weight_gradient = false;
  for (const Gemm& g : b.gemms) {
    input_gradient |= g.m == 2048 && g.n == 2304 && g.k == 6912;
    weight_gradient |= g.m == 2304 && g.n == 6912 && g.k == 2048;
  }
  BOOST_TEST(input_gradient);
  BOOST_TEST(weight_gradient);
}

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
  const KernelCost c = gradient_copy(1e9, 2, 4, 12);
  BOOST_TEST(c.elementwise_bytes.value() == 18e9, tt::tolerance(1e-12));
  BOOST_TEST(c.launches == 24);
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
  t.grad_accumulation = GradAccumulation::InPlace;
  BOOST_TEST(gradient_copy_bytes(t, 1) == 0);
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

// ---- TP overlap: AsyncTP's and Transformer Engine's decomposed GEMMs (plan/cost/tp_overlap.hpp) ----

// A sequence-parallel layer's work over `seq_len` tokens at `tp`, TP overlap run as `kind`.
static LayerWork sp_layer(int seq_len, int tp, TpOverlap kind = TpOverlap::AsyncTp) {
  LayerWork w;
  w.seq_len = seq_len;
  w.tp = tp;
  w.sequence_parallel = true;
  w.tp_overlap = kind;
  return w;
}

BOOST_AUTO_TEST_CASE(dtensor_copies_the_whole_activation_around_each_sequence_parallel_collective) {
  // torchtitan's TP over [b, s, h] sharded on dimension 1: each all-gather's output and each
  // reduce-scatter's input is concatenated from its chunks, a read and a write of b s h x e bytes; four
  // a pass (two of each), two in the per-operator recompute (its all-gathers run again).
  const ModelSpec m = model("llama3-8b");
  LayerWork megatron = sp_layer(8192, 8);
  megatron.micro_batch = 12;
  LayerWork dtensor = megatron;
  dtensor.tensor_parallel = TensorParallelImpl::DTensor;
  const double copy = 2.0 * 2 * 12 * 8192 * m.hidden;
  auto added = [&](auto pass) {
    const KernelCost d = pass(dtensor), g = pass(megatron);
    return std::pair{d.elementwise_bytes.value() - g.elementwise_bytes.value(), d.launches - g.launches};
  };
  const auto forward = added([&](const LayerWork& w) { return layer_forward(m, w, false); });
  const auto backward = added([&](const LayerWork& w) { return layer_backward(m, w, false); });
  const auto op = added([&](const LayerWork& w) { return recompute_forward(m, w, Recompute::Op, false); });
  BOOST_TEST(forward.first == 4 * copy, tt::tolerance(1e-12));
  BOOST_TEST(forward.second == 4);
  BOOST_TEST(backward.first == 4 * copy, tt::tolerance(1e-12));
  BOOST_TEST(backward.second == 4);
  BOOST_TEST(op.first == 2 * copy, tt::tolerance(1e-12));
  // No copy without sequence parallelism (all-reduces work in place), at tp 1, or under TP overlap
  // (AsyncTP's fused ops write each piece in place).
  for (auto change : {+[](LayerWork& w) { w.sequence_parallel = false; }, +[](LayerWork& w) { w.tp = 1; },
                      +[](LayerWork& w) { w.overlap_tp = true; }}) {
    LayerWork w = dtensor;
    change(w);
    BOOST_TEST(sequence_shard_copies(m, w, 4).elementwise_bytes.value() == 0);
  }
}

BOOST_AUTO_TEST_CASE(dtensor_keeps_the_gathered_qkv_and_mlp_inputs_whole_without_recompute) {
  const ModelSpec m = model("gpt3-175b");
  ActivationConfig c;
  c.micro_batch = 1;
  c.seq_len = 2048;
  c.tp = 8;
  c.sequence_parallel = true;
  ActivationConfig dtensor = c;
  dtensor.tensor_parallel = TensorParallelImpl::DTensor;
  // Two of the four 2-byte h-wide tensors outside the TP regions are kept whole instead of 1/t.
  const double whole = 2.0 * 2 * 2048 * m.hidden;
  BOOST_TEST(
      layer_activation_bytes(m, dtensor, false).value() - layer_activation_bytes(m, c, false).value() ==
          whole * (1 - 1.0 / 8),
      tt::tolerance(1e-12));
  c.recompute = dtensor.recompute = Recompute::Full;  // the layer input alone, a shard either way
  BOOST_TEST(layer_activation_bytes(m, dtensor, false).value() ==
             layer_activation_bytes(m, c, false).value());
}

BOOST_AUTO_TEST_CASE(tp_overlap_splits_each_gathered_or_scattered_gemm_into_tp_pieces_of_its_rows) {
  const ModelSpec m = model("llama3-70b");
  for (int tp : {2, 4, 8}) {
    BOOST_TEST_CONTEXT("tp " << tp) {
      LayerWork w;
      w.micro_batch = 2;
      w.seq_len = 4096;
      w.tp = tp;
      w.sequence_parallel = true;
      for (bool forward : {true, false}) {
        const TpPieces p = tp_overlap_pieces(m, w, forward, false);
        // QKV, output, gate-and-up and down projections forward; backward the output and down
        // projections' input gradients (the others' reduce-scatters are not fused: next test).
        const unsigned n = forward ? 4 : 2;
        BOOST_TEST(p.whole.gemms.size() == n);
        BOOST_TEST(p.lead.gemm_flops.value() == p.whole.gemm_flops.value() / tp, tt::tolerance(1e-12));
        BOOST_TEST(p.rest.gemm_flops.value() == p.whole.gemm_flops.value() * (tp - 1) / tp,
                   tt::tolerance(1e-12));
        BOOST_TEST(p.rest.launches == int(n) * (tp - 1));
        for (const Gemm& g : p.lead.gemms) BOOST_TEST(g.m == 2.0 * 4096 / tp);
        // Every piece's GEMM is one of the pass's own, on 1/tp of its rows.
        const KernelCost pass = forward ? layer_forward(m, w, false) : layer_backward(m, w, false);
        const KernelCost d = decomposed(pass, p);
        BOOST_TEST(d.gemm_flops.value() == pass.gemm_flops.value(), tt::tolerance(1e-12));
        BOOST_TEST(d.launches == pass.launches + int(n) * (tp - 1) + int(n));  // pieces, staging kernels
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(tp_overlap_pairs_are_the_fused_ops_one_collective_each) {
  // PyTorch's micro-pipeline TP pass fuses each all-gather with the matmuls that consume it (q, k and v
  // share one: one pair) and each reduce-scatter whose input one matmul produces. The backward's QKV
  // and up projections' input gradients are sums of matmuls before their reduce-scatter: not fused.
  const ModelSpec m = model("llama3-70b");
  using K = CollectiveKind;
  for (TpOverlap kind : {TpOverlap::AsyncTp, TpOverlap::Userbuffers}) {
    const LayerWork w = sp_layer(4096, 8, kind);
    const std::vector<TpPair> f = tp_overlap_pairs(m, w, true, false),
                              b = tp_overlap_pairs(m, w, false, false);
    BOOST_REQUIRE(f.size() == 4u);
    const std::vector<std::pair<TpLinear, K>> forward{{TpLinear::Qkv, K::AllGather},
                                                      {TpLinear::Output, K::ReduceScatter},
                                                      {TpLinear::Up, K::AllGather},
                                                      {TpLinear::Down, K::ReduceScatter}};
    for (size_t i = 0; i < f.size(); ++i) {
      BOOST_TEST((f[i].linear == forward[i].first));
      BOOST_TEST((f[i].collective == forward[i].second));
      BOOST_TEST(f[i].pieces.whole.gemms.size() == 1u);
    }
    BOOST_REQUIRE(b.size() == 2u);
    BOOST_TEST((b[0].linear == TpLinear::Down && b[1].linear == TpLinear::Output));
    for (const TpPair& p : b) BOOST_TEST((p.collective == K::AllGather));
    // The pieces summed are the pass's decomposition.
    TpPieces sum;
    for (const TpPair& p : f) sum += p.pieces;
    BOOST_TEST(sum.rest.gemm_flops.value() == tp_overlap_pieces(m, w, true, false).rest.gemm_flops.value(),
               tt::tolerance(1e-12));
  }
  // On the 8B at tp 8 the QKV projection's rest pieces are shorter than their all-gather's transfer and
  // the up projection's longer: pooled, the up pieces' slack would hide the QKV transfer.
  const ModelSpec small = model("llama3-8b");
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  LayerWork w = sp_layer(8192, 8);
  w.precision = Precision::Bf16;
  const std::vector<TpPair> f = tp_overlap_pairs(small, w, true, false);
  const double gather = collective_time(CollectiveKind::AllGather, layer_collective_bytes(small, w).tp,
                                        {8, 8, false}, h100.pools[0], h100)
                            .time.value();
  BOOST_TEST(compute_time(f[0].pieces.rest, d, Precision::Bf16).value() < gather);
  BOOST_TEST(compute_time(f[2].pieces.rest, d, Precision::Bf16).value() > gather);
}

BOOST_AUTO_TEST_CASE(torchtitan_float8_tp_gathers_float8_and_scatters_bf16) {
  // torchao's Float8ColwiseParallel / PrepareFloat8ModuleInput cast the sequence shard before the
  // all-gather (the output gradient before the backward's): one byte an element; the reduce-scatters
  // move bf16 partial sums.
  const ModelSpec m = model("llama3-70b");
  LayerWork w = sp_layer(8192, 8);
  w.precision = Precision::Fp8;
  w.fp8_recipe = Fp8Recipe::TorchaoTensorwise;
  w.tensor_parallel = TensorParallelImpl::DTensor;
  const LayerCollectiveBytes b = layer_collective_bytes(m, w);
  BOOST_TEST(b.tp.value() == 8192.0 * m.hidden * 2);
  BOOST_TEST(b.tp_gather.value() == b.tp.value() / 2);
  // Transformer Engine's recipes, Megatron's linears or bf16: the all-gathers move what the scatters do.
  for (auto change : {+[](LayerWork& x) { x.fp8_recipe = Fp8Recipe::TeDelayed; },
                      +[](LayerWork& x) { x.tensor_parallel = TensorParallelImpl::Megatron; },
                      +[](LayerWork& x) { x.precision = Precision::Bf16; }}) {
    LayerWork x = w;
    change(x);
    const LayerCollectiveBytes c = layer_collective_bytes(m, x);
    BOOST_TEST(c.tp_gather.value() == c.tp.value());
  }
}

BOOST_AUTO_TEST_CASE(tp_overlap_decomposes_nothing_without_sequence_parallelism_and_no_experts) {
  LayerWork w;
  w.seq_len = 2048;
  w.tp = 4;
  BOOST_TEST(tp_overlap_pieces(model("llama3-70b"), w, true, false).whole.gemms.size() == 0u);  // all-reduces
  w.sequence_parallel = true;
  w.tp = 1;
  BOOST_TEST(tp_overlap_pieces(model("llama3-70b"), w, true, false).whole.gemms.size() == 0u);
  // An MoE layer decomposes its attention's pair alone: the experts run between all-to-alls.
  w.tp = 2;
  BOOST_TEST(tp_overlap_pieces(model("mixtral-8x7b"), w, true, true).whole.gemms.size() == 2u);
}

BOOST_AUTO_TEST_CASE(gemm_pieces_of_few_rows_cost_more_than_the_whole_gemm) {
  // 1,024 tokens at tp 8: pieces of 128 rows fill fewer of the H100's 132 SMs' tiles than one GEMM of
  // 1,024 rows (wave quantization), and launch 8 times as often; the bound stays below the time.
  const ModelSpec m = model("llama3-70b");
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  const LayerWork w = sp_layer(1024, 8);
  const TpPieces p = tp_overlap_pieces(m, w, true, false);
  KernelCost pieces = p.lead;
  pieces += p.rest;
  BOOST_TEST(compute_time(pieces, d, Precision::Bf16).value() >
             compute_time(p.whole, d, Precision::Bf16).value());
  const KernelCost f = layer_forward(m, w, false), split = decomposed(f, p);
  BOOST_TEST(compute_time(split, d, Precision::Bf16).value() > compute_time(f, d, Precision::Bf16).value());
  BOOST_TEST(compute_time_bound(split, d, Precision::Bf16).value() <=
             compute_time(split, d, Precision::Bf16).value());
}

BOOST_AUTO_TEST_CASE(userbuffers_splits_as_transformer_engine_runs_its_default_overlaps) {
  // Transformer Engine's initialize_ub defaults: ring_exchange all-gathers in tp pieces (QKV and up
  // forward, output and down input gradients), pipelined reduce-scatters in 4 (output and down forward),
  // bulk for the QKV and up input gradients (not split: their reduce-scatters run beside the weight
  // gradients); the reduce-scatter kernel sums the partial results itself.
  const ModelSpec m = model("llama3-70b");
  const LayerWork w = sp_layer(4096, 8, TpOverlap::Userbuffers);
  const TpPieces f = tp_overlap_pieces(m, w, true, false);
  BOOST_TEST(f.whole.gemms.size() == 4u);
  // Leads: 1/8 of the gathered pair's rows, 1/4 of the scattered pair's.
  for (const Gemm& g : f.lead.gemms) BOOST_TEST((g.m == 4096.0 / 8 || g.m == 4096.0 / 4));
  BOOST_TEST(f.rest.launches == 2 * 7 + 2 * 3);
  BOOST_TEST(f.staging.launches == 2);  // the gathers' own shard copied in; no sum after the scatters
  const TpPieces b = tp_overlap_pieces(m, w, false, false);
  BOOST_TEST(b.whole.gemms.size() == 2u);  // the output and down projections' input gradients
  BOOST_TEST(b.rest.launches == 2 * 7);
  const LayerWork a = sp_layer(4096, 8);
  BOOST_TEST(tp_overlap_bulk_backward(w));
  BOOST_TEST(!tp_overlap_bulk_backward(a));
  BOOST_TEST(tp_overlap_pieces(m, a, false, false).whole.gemms.size() == 2u);  // AsyncTP's: the same
}

BOOST_AUTO_TEST_CASE(userbuffers_pieces_on_three_streams_fill_the_waves_together) {
  // 4,096 tokens at tp 8 on H100: AsyncTP's pieces of 512 rows each leave a partly idle last wave;
  // Transformer Engine's, issued round-robin on 3 compute streams, share it, so they cost less (the
  // decomposed forward still costs more than the whole one).
  const ModelSpec m = model("llama3-70b");
  const ClusterSpec h100 = cluster("dgx-h100");
  const DeviceSpec& d = h100.device_of(h100.pools[0]);
  const LayerWork w = sp_layer(4096, 8), ub = sp_layer(4096, 8, TpOverlap::Userbuffers);
  // The output and down projections' input gradients (ring_exchange): 7 pieces after the lead, which
  // tiled one after another would take 7 leads' time.
  const TpPieces b = tp_overlap_pieces(m, ub, false, false);
  BOOST_TEST(compute_time(b.rest, d, Precision::Bf16).value() <
             0.95 * 7 * compute_time(b.lead, d, Precision::Bf16).value());
  const KernelCost f = layer_forward(m, ub, false);
  const double whole = compute_time(f, d, Precision::Bf16).value();
  const double async =
      compute_time(decomposed(f, tp_overlap_pieces(m, w, true, false)), d, Precision::Bf16).value();
  const double te =
      compute_time(decomposed(f, tp_overlap_pieces(m, ub, true, false)), d, Precision::Bf16).value();
  BOOST_TEST(te < async);
  BOOST_TEST(te >= whole);  // the leads' rows still fill fewer tiles
}
