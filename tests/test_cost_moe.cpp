// What an MoE layer costs beyond its experts' GEMMs, as Megatron-Core's all-to-all token dispatcher runs
// it: the permutations around the experts, the host's wait for the token counts, and the grouped GEMM's
// tiles per expert (issue 19, NM-16).
#define BOOST_TEST_MODULE cost_moe
#include <boost/test/unit_test.hpp>

#include "catalog_files.hpp"
#include "plan/cost/compute.hpp"

using namespace paratwin;
using namespace paratwin::cost;
using namespace paratwin::test;
namespace tt = boost::test_tools;

static LayerWork moe_work(int ep) {
  LayerWork w;
  w.seq_len = 4096;
  w.micro_batch = 2;
  w.ep = ep;
  return w;
}

static double traffic(const KernelCost& c) {
  return c.memory_bound_bytes().value();
}

BOOST_AUTO_TEST_CASE(several_experts_per_rank_sort_the_received_rows_by_expert_and_back) {
  // Under ep > 1 the rows a rank receives arrive grouped by source rank; with more than one expert on
  // the rank they are sorted by expert before the experts and back after them: two passes that read
  // and write every row, 4 e k b s h bytes more forward. One expert per rank needs no sort.
  const ModelSpec m = model("mixtral-8x7b");  // 8 experts, top 2
  const double e = 2, k = m.moe->top_k, tokens = 2.0 * 4096, h = m.hidden;
  const double sort = 4 * e * k * tokens * h;
  BOOST_TEST(
      traffic(layer_forward(m, moe_work(2), true)) - traffic(layer_forward(m, moe_work(1), true)) == sort,
      tt::tolerance(1e-9));
  BOOST_TEST(traffic(layer_forward(m, moe_work(8), true)) == traffic(layer_forward(m, moe_work(1), true)),
             tt::tolerance(1e-12));
  // The backward moves the gradients back through the same passes: their traffic once more, not twice.
  BOOST_TEST(
      traffic(layer_backward(m, moe_work(2), true)) - traffic(layer_backward(m, moe_work(1), true)) == sort,
      tt::tolerance(1e-9));
  // A fused dispatcher (DeepEP, HybridEP) places the copies in its dispatch kernel: no sort.
  LayerWork fused = moe_work(2);
  fused.moe_dispatcher = MoeDispatcher::Fused;
  BOOST_TEST(traffic(layer_forward(m, fused, true)) == traffic(layer_forward(m, moe_work(1), true)),
             tt::tolerance(1e-12));
  // The rows follow the hottest rank's load.
  LayerWork hot = moe_work(2);
  hot.expert_load = 1.5;
  LayerWork hot_one = moe_work(1);
  hot_one.expert_load = 1.5;
  BOOST_TEST(traffic(layer_forward(m, hot, true)) - traffic(layer_forward(m, hot_one, true)) == 1.5 * sort,
             tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(dispatch_traffic_scales_with_top_k_tokens_and_hidden) {
  // Per routed copy of a token: permute and unpermute read and write it (4 e h), the sort by expert
  // (ep 2) does too (4 e h), and the gated activation reads two f-wide halves and writes one (3 e f).
  // Nothing else in the layer's memory-bound work grows with top_k.
  ModelSpec two = model("mixtral-8x7b"), four = two;
  four.moe->top_k = 4;
  const double e = 2, tokens = 2.0 * 4096, h = two.hidden, f = two.ffn_hidden;
  const double per_copy = 4 * e * h + 4 * e * h + 3 * e * f;
  BOOST_TEST(
      traffic(layer_forward(four, moe_work(2), true)) - traffic(layer_forward(two, moe_work(2), true)) ==
          2 * tokens * per_copy,
      tt::tolerance(1e-9));
  // A wider hidden state moves more bytes per copy in the permutations alone (and in the norms, residual
  // and router, which do not depend on top_k): the difference of differences is the k copies.
  ModelSpec wide_two = two, wide_four = four;
  wide_two.hidden = wide_four.hidden = 2 * two.hidden;
  const double dk_narrow =
      traffic(layer_forward(four, moe_work(2), true)) - traffic(layer_forward(two, moe_work(2), true));
  const double dk_wide = traffic(layer_forward(wide_four, moe_work(2), true)) -
                         traffic(layer_forward(wide_two, moe_work(2), true));
  BOOST_TEST(dk_wide - dk_narrow == 2 * tokens * 8 * e * h, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(an_moe_layer_forward_waits_for_the_host_once) {
  // The dispatcher copies the token counts per expert to the host (the all-to-all's split sizes, the
  // grouped GEMM's row splits): one synchronous launch per MoE layer forward; none in the backward
  // (the splits are kept), none in a dense layer.
  const ModelSpec m = model("mixtral-8x7b");
  const LayerWork w = moe_work(2);
  BOOST_TEST(layer_forward(m, w, true).host_syncs == 1);
  BOOST_TEST(layer_backward(m, w, true).host_syncs == 0);
  BOOST_TEST(layer_forward(m, w, false).host_syncs == 0);
  BOOST_TEST((layer_forward(m, w, true) * 9).host_syncs == 9);
  // Launched asynchronously they cost efficiency.synchronous_launch each; under launch_blocking every
  // launch does already, the syncs among them.
  TrainingSpec async, blocking;
  blocking.launch_blocking = true;
  const KernelCost nine = layer_forward(m, w, true) * 9;
  BOOST_TEST(launched_as_trained(nine, async).synchronous_launches == 9);
  BOOST_TEST(launched_as_trained(nine, blocking).synchronous_launches == nine.launches);
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools[0]);
  KernelCost unsynced = nine;
  unsynced.host_syncs = 0;
  const double added = compute_time(launched_as_trained(nine, async), h100, Precision::Bf16).value() -
                       compute_time(launched_as_trained(unsynced, async), h100, Precision::Bf16).value();
  BOOST_TEST(added == 9 * h100.efficiency.synchronous_launch.value(), tt::tolerance(1e-6));
  // The optimizer's bound sees the same wait.
  BOOST_TEST(
      compute_time_bound(launched_as_trained(nine, async), h100, Precision::Bf16).value() -
              compute_time_bound(launched_as_trained(unsynced, async), h100, Precision::Bf16).value() ==
          added,
      tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(a_grouped_gemm_tiles_each_experts_rows_on_their_own) {
  // 16 experts of 1,024 rows each tile exactly as 16 batched GEMMs of 1,024 rows; 16 experts of 100
  // rows each leave every expert's last tile row partly idle, which one GEMM of 1,600 rows would not.
  const double n = 5760, k = 2880;
  const Gemm grouped{16 * 1024, n, k, 1, 16};
  const Gemm batched{1024, n, k, 16};
  BOOST_TEST(wave_efficiency(grouped, 132) == wave_efficiency(batched, 132), tt::tolerance(1e-12));
  const Gemm few_rows{16 * 100, n, k, 1, 16};
  BOOST_TEST(wave_efficiency(few_rows, 132) == wave_efficiency(Gemm{100, n, k, 16}, 132),
             tt::tolerance(1e-12));
  BOOST_TEST(wave_efficiency(few_rows, 132) < wave_efficiency(Gemm{1600, n, k}, 132));
  // A weight gradient writes one result per expert: tiled as a batch of them, as before.
  Gemm wgrad{k, n, 16 * 100, 1, 16};
  wgrad.copies_are_results = true;
  BOOST_TEST(wave_efficiency(wgrad, 132) == wave_efficiency(Gemm{k, n, 100, 16}, 132), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(an_moe_layer_with_biases_adds_the_experts_output_bias_expert_by_expert) {
  // Megatron-Core's TEGroupedMLP adds the grouped fc2's biases, weighted by the router's probabilities,
  // in a Python loop over the rank's experts (_apply_bias): per element of the rows x h output, bias x
  // probability (writes e), the add (reads 2 e, writes e), the cat (reads e, writes e): 6 e forward in
  // 2 E + 1 kernels (E experts on the rank); its backward, the bias's and probability's gradients (3 e
  // each) and the rows' cat (2 e): 8 e in 4 E + 2 kernels. GPT-OSS-120B (biases, 128 experts, top 4)
  // at ep 8: 16 experts a rank.
  const ModelSpec biased = model("gpt-oss-120b");
  ModelSpec plain = biased;
  plain.bias = false;
  LayerWork w = moe_work(8);
  w.micro_batch = 1;
  const double e = 2, rows = biased.moe->top_k * 4096.0, h = biased.hidden, experts = 128 / 8;
  const KernelCost fb = layer_forward(biased, w, true), fp = layer_forward(plain, w, true);
  BOOST_TEST(traffic(fb) - traffic(fp) == 6 * e * rows * h, tt::tolerance(1e-9));
  BOOST_TEST(fb.launches - fp.launches == 2 * experts + 1);
  const KernelCost bb = layer_backward(biased, w, true), bp = layer_backward(plain, w, true);
  BOOST_TEST(traffic(bb) - traffic(bp) == 8 * e * rows * h, tt::tolerance(1e-9));
  BOOST_TEST(bb.launches - bp.launches == 4 * experts + 2);
  // More experts on a rank, more kernels for the same rows.
  LayerWork fewer_ranks = w;
  fewer_ranks.ep = 4;
  BOOST_TEST(layer_forward(biased, fewer_ranks, true).launches -
                 layer_forward(plain, fewer_ranks, true).launches ==
             2 * 32 + 1);
  // A dense layer's biases stay in its GEMMs' epilogues; eager runs count their bias gradients apart.
  BOOST_TEST(traffic(layer_forward(biased, w, false)) == traffic(layer_forward(plain, w, false)),
             tt::tolerance(1e-12));
  LayerWork eager = w;
  eager.kernels = LayerKernels::Eager;
  BOOST_TEST(traffic(layer_forward(biased, eager, true)) == traffic(layer_forward(plain, eager, true)),
             tt::tolerance(1e-12));
  // It takes time on the device: the biased layer is slower.
  const ClusterSpec dgx = cluster("dgx-h100");
  const DeviceSpec& h100 = dgx.device_of(dgx.pools[0]);
  BOOST_TEST(compute_time(bb, h100, Precision::Bf16).value() >
             compute_time(bp, h100, Precision::Bf16).value());
}
