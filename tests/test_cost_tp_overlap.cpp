// TP overlap: AsyncTP's and Transformer Engine's decomposed GEMMs (plan/cost/tp_overlap.hpp), and
// DTensor's copies around sequence parallelism's collectives.
#define BOOST_TEST_MODULE cost_tp_overlap
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
    BOOST_TEST(sequence_shard_copies(m, w, 2, 2).elementwise_bytes.value() == 0);
  }
  // torchao's float8 TP gathers float8 (forward: the inputs; backward: the output gradients, cast
  // before their gather), so its gathers' concatenations move one byte an element, its scatters' two.
  LayerWork float8 = dtensor;
  float8.precision = Precision::Fp8;
  float8.fp8_recipe = Fp8Recipe::TorchaoTensorwise;
  BOOST_TEST(sequence_shard_copies(m, float8, 2, 2).elementwise_bytes.value() == 3 * copy,
             tt::tolerance(1e-12));
  BOOST_TEST(sequence_shard_copies(m, float8, 2, 0).elementwise_bytes.value() == copy, tt::tolerance(1e-12));
  BOOST_TEST(sequence_shard_copies(m, float8, 2, 2).launches == 4);
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

BOOST_AUTO_TEST_CASE(float8_tp_gathers_move_one_byte_and_scatters_bf16) {
  // torchao's Float8ColwiseParallel / PrepareFloat8ModuleInput (torchtitan) and Transformer Engine's
  // LayerNormLinear and grad_output_preprocess (Megatron) cast the sequence shard before the all-gather
  // (the output gradient before the backward's): one byte an element; the reduce-scatters move bf16
  // partial sums.
  const ModelSpec m = model("llama3-70b");
  LayerWork torchao = sp_layer(8192, 8);
  torchao.precision = Precision::Fp8;
  torchao.fp8_recipe = Fp8Recipe::TorchaoTensorwise;
  torchao.tensor_parallel = TensorParallelImpl::DTensor;
  LayerWork te = torchao;
  te.tensor_parallel = TensorParallelImpl::Megatron;
  for (Fp8Recipe recipe : {Fp8Recipe::TeDelayed, Fp8Recipe::TeCurrent}) {
    te.fp8_recipe = recipe;
    for (const LayerWork& w : {torchao, te}) {
      const LayerCollectiveBytes b = layer_collective_bytes(m, w);
      BOOST_TEST(b.tp.value() == 8192.0 * m.hidden * 2);
      BOOST_TEST(b.tp_gather.value() == b.tp.value() / 2);
      // Current scaling reduces each gathered tensor's fp32 amax over the TP group first.
      const bool current =
          w.tensor_parallel == TensorParallelImpl::Megatron && recipe == Fp8Recipe::TeCurrent;
      BOOST_TEST(b.tp_amax.value() == (current ? 4.0 : 0.0));
    }
  }
  // A recipe under the other framework's linears, bf16, or no sequence parallelism (all-reduces): the
  // all-gathers move what the scatters do.
  for (auto change : {+[](LayerWork& x) { x.fp8_recipe = Fp8Recipe::TeDelayed; },
                      +[](LayerWork& x) { x.tensor_parallel = TensorParallelImpl::Megatron; },
                      +[](LayerWork& x) { x.precision = Precision::Bf16; },
                      +[](LayerWork& x) { x.sequence_parallel = false; }}) {
    LayerWork x = torchao;
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
