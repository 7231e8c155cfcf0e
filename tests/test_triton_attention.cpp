// training.attention: triton, the Triton FlashAttention kernel llm-foundry's MPT ran (attn_impl: triton):
// it runs at the device file's efficiency.triton figures by key length, pads heads to a power of two,
// keeps what FlashAttention keeps for its backward, and scenarios that cannot run it are refused.
// Ratios and counts only, no wall clock.
#define BOOST_TEST_MODULE triton_attention
#include <boost/test/unit_test.hpp>

#include <string>

#include "catalog_files.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/fused_attention_rate.hpp"
#include "plan/cost/memory.hpp"
#include "plan/spec/catalog.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::cost;
using paratwin::test::cluster;
using paratwin::test::model;
namespace tt = boost::test_tools;

namespace {

LayerWork work(int seq_len, AttentionKind kind) {
  LayerWork w;
  w.seq_len = seq_len;
  w.micro_batch = 16384 / seq_len;
  w.attention = kind;
  return w;
}

// Seconds per executed FLOP of one layer's attention forward and backward.
double seconds_per_flop(const ModelSpec& m, const DeviceSpec& d, int seq_len, AttentionKind kind) {
  const LayerWork w = work(seq_len, kind);
  const KernelCost f = attention_core_forward(m, w), b = layer_backward(m, w, false);
  KernelCost attention;
  attention.flash_forward_flops = f.flash_forward_flops;
  attention.flash_backward_flops = b.flash_backward_flops;
  attention.fused_kernel = kind;
  attention.fused_head_dim = m.head_dim;
  attention.fused_key_length = seq_len;
  return compute_time(attention, d, Precision::Bf16).value() /
         (attention.flash_forward_flops + attention.flash_backward_flops).value();
}

std::string error_of(const std::string& yaml) {
  try {
    load_scenario(parse_yaml(yaml, "s.yaml"), {}, Catalog(paratwin_test::source_dir()));
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(triton_runs_at_the_device_files_triton_figures) {
  const ModelSpec m = model("mpt-7b");  // 32 heads of 128
  for (const char* name : {"dgx-a100-80g", "dgx-h100"}) {
    const ClusterSpec c = cluster(name);
    const DeviceSpec& d = c.device_of(c.pools[0]);
    BOOST_TEST_REQUIRE(d.efficiency.triton.has_value());
    const double peak = d.peak.at(Precision::Bf16).value();
    for (int s : {1024, 2048, 8192}) {
      const EfficiencySpec::FusedRates r = fused_rates_at(*d.efficiency.triton, s);
      // Forward and backward at the kernel's rate at this key length: the backward's 2.5x FLOPs too.
      BOOST_TEST(seconds_per_flop(m, d, s, AttentionKind::Triton) == 1 / (peak * r.forward),
                 tt::tolerance(1e-9));
      BOOST_TEST(r.forward == r.backward);  // only the forward + backward rate is published
      // Well under FlashAttention 2's rate: 0.43-0.46 of it from 1k on in the FA2 paper's A100 figure,
      // and both device files carry FA2 by key length, so the ratio holds at every length.
      const double ratio =
          seconds_per_flop(m, d, s, AttentionKind::Flash2) / seconds_per_flop(m, d, s, AttentionKind::Triton);
      BOOST_TEST(ratio > 0.4);
      BOOST_TEST(ratio < 0.5);
    }
    // The rate rises with the key length, as FlashAttention's does.
    BOOST_TEST(seconds_per_flop(m, d, 1024, AttentionKind::Triton) >
               seconds_per_flop(m, d, 8192, AttentionKind::Triton));
  }
  // The A100 figure at 2048: 68 of 312 TFLOP/s (FA2 paper, Figure 4d).
  const ClusterSpec a100 = cluster("dgx-a100-80g");
  BOOST_TEST(fused_rates_at(*a100.device_of(a100.pools[0]).efficiency.triton, 2048).forward == 0.218);
  // `flash` never picks the Triton kernel.
  BOOST_TEST((fused_kernel_of(AttentionKind::Flash, a100.device_of(a100.pools[0]).efficiency) ==
              FusedKernel::Flash2));
  BOOST_TEST((fused_kernel_of(AttentionKind::Triton, a100.device_of(a100.pools[0]).efficiency) ==
              FusedKernel::Triton));
}

BOOST_AUTO_TEST_CASE(flash2_on_a100_follows_the_fa2_papers_a100_curve_by_key_length) {
  const ModelSpec m = model("mpt-7b");  // 32 heads of 128
  const ClusterSpec a100 = cluster("dgx-a100-80g");
  const DeviceSpec& d = a100.device_of(a100.pools[0]);
  BOOST_TEST_REQUIRE(d.efficiency.flash2.has_value());
  const EfficiencySpec::FusedAttention& fa2 = *d.efficiency.flash2;
  // At 8192 the measured figures stand (forward 185.6, forward + backward 179.5 TFLOP/s).
  BOOST_TEST(fa2.seq_len == 8192);
  BOOST_TEST(fused_rates_at(fa2, 8192).forward == 0.59);
  BOOST_TEST(fused_rates_at(fa2, 8192).backward == 0.57);
  // Elsewhere they follow FA2's forward + backward rate in the FA2 paper's A100 figure (Figure 4d:
  // 99, 133, 155, 173, 182, 189 TFLOP/s at 512 ... 16k): an executed FLOP at 2k costs 182/155 of one at
  // 8k, at 512 182/99, at 16k 182/189.
  const double at_8k = seconds_per_flop(m, d, 8192, AttentionKind::Flash2);
  BOOST_TEST(seconds_per_flop(m, d, 2048, AttentionKind::Flash2) / at_8k == 182.0 / 155,
             tt::tolerance(0.005));
  BOOST_TEST(seconds_per_flop(m, d, 512, AttentionKind::Flash2) / at_8k == 182.0 / 99, tt::tolerance(0.005));
  BOOST_TEST(seconds_per_flop(m, d, 16384, AttentionKind::Flash2) / at_8k == 182.0 / 189,
             tt::tolerance(0.005));
  // The A100 40 GB (same compute die) carries the same figures.
  const ClusterSpec a100_40 = cluster("a100-40g-roce");
  const DeviceSpec& d40 = a100_40.device_of(a100_40.pools[0]);
  for (int s : {512, 2048, 8192, 16384})
    BOOST_TEST(seconds_per_flop(m, d40, s, AttentionKind::Flash2) ==
               seconds_per_flop(m, d, s, AttentionKind::Flash2));
}

BOOST_AUTO_TEST_CASE(triton_pads_a_head_to_the_next_power_of_two) {
  BOOST_TEST(fused_kernel_head_dim(FusedKernel::Triton, 128) == 128);
  BOOST_TEST(fused_kernel_head_dim(FusedKernel::Triton, 64) == 64);
  BOOST_TEST(fused_kernel_head_dim(FusedKernel::Triton, 80) == 128);  // FA2 pads an 80-wide head to 96
  BOOST_TEST(fused_kernel_head_dim(FusedKernel::Flash2, 80) == 96);
  BOOST_TEST(fused_kernel_head_dim(FusedKernel::Triton, 8) == 16);
  // An 80-wide head costs what a 128-wide one does.
  const ClusterSpec c = cluster("dgx-h100");
  const DeviceSpec& d = c.device_of(c.pools[0]);
  ModelSpec narrow = model("mpt-7b"), wide = narrow;
  narrow.head_dim = 80;
  const LayerWork w = work(2048, AttentionKind::Triton);
  BOOST_TEST(compute_time(attention_core_forward(narrow, w), d, Precision::Bf16).value() ==
                 compute_time(attention_core_forward(wide, w), d, Precision::Bf16).value(),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(triton_keeps_what_flashattention_keeps_for_its_backward) {
  // The kernel writes no s x s scores: Q, K, V, the output and one fp32 log-sum-exp per query and head
  // (lse in _flash_attn_forward), as FlashAttention 2.
  const ModelSpec m = model("mpt-7b");
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    ActivationConfig triton, flash2, unfused;
    triton.seq_len = flash2.seq_len = unfused.seq_len = 8192;
    triton.recompute = flash2.recompute = unfused.recompute = r;
    triton.attention = AttentionKind::Triton;
    flash2.attention = AttentionKind::Flash2;
    unfused.attention = AttentionKind::Unfused;
    BOOST_TEST(layer_activation_bytes(m, triton, false).value() ==
               layer_activation_bytes(m, flash2, false).value());
    BOOST_TEST(recompute_working_bytes(m, triton, false).value() ==
               recompute_working_bytes(m, flash2, false).value());
    if (r == Recompute::None)
      BOOST_TEST(layer_activation_bytes(m, triton, false).value() <
                 layer_activation_bytes(m, unfused, false).value());
  }
}

BOOST_AUTO_TEST_CASE(scenarios_that_cannot_run_the_triton_kernel_are_refused) {
  const std::string base = "cluster: {from: dgx-h100, nodes: 1}\ntraining: {global_batch: 8, attention: ";
  // A misspelt kind names the nearest.
  const std::string misspelt = error_of("model: mpt-7b\n" + base + "trtion}\n");
  BOOST_TEST(misspelt.find("invalid value 'trtion' for training.attention") != std::string::npos);
  BOOST_TEST(misspelt.find("did you mean 'triton'?") != std::string::npos);
  // Heads wider than 128: flash_attn_triton.py refuses them.
  const std::string wide = error_of(
      "model: {layers: 2, hidden: 1024, heads: 4, vocab: 512, seq_len: 2048}\n" + base + "triton}\n");
  BOOST_TEST(wide.find("attention triton takes heads up to 128 wide") != std::string::npos);
  BOOST_TEST(wide.find("model.head_dim=256") != std::string::npos);
  // A device file without the kernel's figures.
  const std::string bare = error_of(
      "model: mpt-7b\ncluster: {from: dgx-h200, nodes: 1}\ntraining: {global_batch: 8, attention: triton}\n");
  BOOST_TEST(bare.find("has no efficiency.triton") != std::string::npos);
  // The llm-foundry devices have them.
  const ScenarioSpec ok = load_scenario(parse_yaml("model: mpt-7b\n" + base + "triton}\n", "s.yaml"), {},
                                        Catalog(paratwin_test::source_dir()));
  BOOST_TEST((ok.training.attention == AttentionKind::Triton));
}

BOOST_AUTO_TEST_CASE(heads_of_64_run_at_the_head_dim_64_figures) {
  // MPT-125M: 12 heads of 64; MPT-760M: 12 heads of 128. Per executed FLOP, in the FA2 paper's A100
  // figure (4c against 4d): the Triton kernel at 64 runs 59/50 of its rate at 128 at 512 keys and the
  // same at 16k (80/80); FlashAttention 2 at 64 runs 165/182 of 128's at 8k.
  const ModelSpec small = model("mpt-125m"), wide = model("mpt-760m");
  const ClusterSpec a100 = cluster("dgx-a100-80g");
  const DeviceSpec& d = a100.device_of(a100.pools[0]);
  auto ratio = [&](int s, AttentionKind kind) {
    return seconds_per_flop(wide, d, s, kind) / seconds_per_flop(small, d, s, kind);
  };
  BOOST_TEST(ratio(512, AttentionKind::Triton) == 59.0 / 50, tt::tolerance(0.01));
  BOOST_TEST(ratio(16384, AttentionKind::Triton) == 1.0, tt::tolerance(0.01));
  BOOST_TEST(ratio(8192, AttentionKind::Flash2) == 165.0 / 182, tt::tolerance(0.005));
  // On H100, FlashAttention 2 at 64 runs 273/308 of 128's at 8k (the paper's H100 figure), causal and
  // (0.878) without a mask.
  const ClusterSpec h100 = cluster("dgx-h100");
  const auto& fa2 = *h100.device_of(h100.pools[0]).efficiency.flash2;
  BOOST_TEST(fa2.head_dim == 128);
  const EfficiencySpec::FusedRates at64 = fused_rates_at(fused_curve_for(fa2, 64), 8192);
  BOOST_TEST(at64.forward / fa2.forward == 273.0 / 308, tt::tolerance(0.01));
  BOOST_TEST(*at64.forward_full / *fa2.forward_full == 294.0 / 335, tt::tolerance(0.01));
  // FlashAttention 3 at 64: its forward 460/602 of 128's at 8k (the FA3 paper's H100 figure), its
  // backward 431.7/531.6 (a PyTorch benchmark at 16k against PR 1791's 8k figure at 128).
  const auto& fa3 = *h100.device_of(h100.pools[0]).efficiency.flash3;
  const EfficiencySpec::FusedRates fa3_64 = fused_rates_at(fused_curve_for(fa3, 64), 8192);
  BOOST_TEST(fa3_64.forward / fa3.forward == 460.0 / 602, tt::tolerance(0.01));
  BOOST_TEST(fa3_64.backward / fa3.backward == 431.7 / 531.6, tt::tolerance(0.01));
  // A size with no curve of its own (96: MPT-3B's 80-wide heads padded) takes the 128 figures.
  BOOST_TEST(&fused_curve_for(fa2, 96) == static_cast<const EfficiencySpec::FusedCurve*>(&fa2));
}
