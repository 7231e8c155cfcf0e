// Compute model: a kernel's time on a device (GEMMs by shape, memory-bound kernels by kind, fused and
// unfused attention), each pinned against published or hand-derived numbers.
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
  copy.elementwise_bytes = Bytes(1e9);
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

BOOST_AUTO_TEST_CASE(a_kernel_groups_time_splits_into_its_kinds_of_kernel) {
  const ClusterSpec dgx = cluster("dgx-a100-80g");
  const DeviceSpec& d = dgx.device_of(dgx.pools[0]);
  ModelSpec m = model("llama3-8b");
  m.dropout = true;
  LayerWork w;
  w.seq_len = 2048;
  for (AttentionKind kind : {AttentionKind::Unfused, AttentionKind::Flash2}) {
    w.attention = kind;
    const KernelCost layer = layer_forward(m, w, false);
    const KernelTimes t = kernel_times(layer, d, Precision::Bf16);
    BOOST_TEST(t.total() == compute_time(layer, d, Precision::Bf16).value(), tt::tolerance(1e-12));
    BOOST_TEST(t.launch_s == 5e-6 * layer.launches, tt::tolerance(1e-12));
    BOOST_TEST(t.memory_bound_s > 0);
    // The linear layers alone are the GEMM term; the attention core (its products, or the fused
    // kernel) is the attention term and adds no GEMM time.
    KernelCost linears = layer;
    linears.gemms = {};
    for (const Gemm& g : layer.gemms)
      if (!g.attention) linears.gemms.add(g);
    BOOST_TEST(t.gemm_s == kernel_times(linears, d, Precision::Bf16).gemm_s, tt::tolerance(1e-12));
    const KernelTimes core = kernel_times(attention_core_forward(m, w), d, Precision::Bf16);
    BOOST_TEST(core.gemm_s == 0);
    BOOST_TEST(t.attention_s == core.attention_s, tt::tolerance(1e-12));
    BOOST_TEST(core.attention_s > 0);
  }
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
