// Plans, lowering and the analytic evaluator: schedules, bubbles, FLOPs conservation, memory, the
// plan file round trip, verification, and golden Program texts (PARATWIN_UPDATE_GOLDEN=1 rewrites them).
#define BOOST_TEST_MODULE program
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "catalog_scenario.hpp"
#include "fast_cluster.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/cost/compute.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/ir/program.hpp"
#include "plan/ir/schedule.hpp"
#include "plan/report/report.hpp"
#include "plan/topology/rank_groups.hpp"

using namespace paratwin;
namespace tt = boost::test_tools;

namespace {

using paratwin_test::scenario;

// A cluster where communication is nearly free, so that pipeline timing is compute alone.
const std::string kFastCluster = paratwin_test::fast_cluster();

// Layers dominate: a deep, narrow model with a small vocabulary.
const char* kDeepModel =
    "model: {name: deep, layers: 32, hidden: 2048, heads: 16, vocab: 512, seq_len: 1024}\n";

struct Run {
  ScenarioSpec s;
  Plan plan;
  Program program;
  Evaluation eval;
};

Run run(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  Run r{scenario(yaml, sets), {}, {}, {}};
  r.plan = complete_plan(r.s);
  const auto problems = verify(r.plan, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems.front()));
  r.program = lower(r.plan, r.s.model, r.s.cluster, r.s.training);
  r.eval = evaluate(r.program, r.s.cluster, r.s.training);
  return r;
}

// The memory-bound bytes of all the first role's tasks.
double role_elementwise_bytes(const Run& r) {
  double b = 0;
  for (const Task& t : r.program.roles[0].tasks) b += t.work.elementwise_bytes.value();
  return b;
}

double bubble_fraction(const Run& r) {
  const TimeBreakdown& b = r.eval.roles[r.eval.critical_role].breakdown;
  return b.bubble_s / (b.compute_s + b.recompute_s);
}

std::string pipeline(int pp, int m, const std::string& schedule, int v = 1) {
  return std::string(kDeepModel) + kFastCluster + "training: {global_batch: " + std::to_string(m) +
         ", seq_len: 1024}\n"
         "plan: {tp: 1, pp: " +
         std::to_string(pp) + ", dp: 1, micro_batch: 1, schedule: " + schedule +
         ", virtual_stages: " + std::to_string(v) + "}\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_f_one_b_warms_up_with_pp_minus_rank_minus_one_forwards) {
  const auto order = pipeline_order(Schedule::OneFOneB, 4, 1, 8, 1);
  BOOST_REQUIRE(order.size() == 16u);
  BOOST_TEST(order[0].forward);
  BOOST_TEST(order[1].forward);
  BOOST_TEST(order[2].forward);
  BOOST_TEST(!order[3].forward);  // after 2 warm-up forwards, F then B alternate
  BOOST_TEST(order[3].microbatch == 0);
}

BOOST_AUTO_TEST_CASE(interleaved_schedule_visits_every_chunk_of_every_microbatch_once) {
  const int pp = 4, v = 2, m = 8;
  for (int rank = 0; rank < pp; ++rank) {
    const auto order = pipeline_order(Schedule::Interleaved, pp, v, m, rank);
    BOOST_REQUIRE(order.size() == size_t(2 * m * v));
    std::set<std::tuple<bool, int, int>> seen;
    for (const auto& s : order) {
      BOOST_TEST(s.chunk % pp == rank);
      seen.insert({s.forward, s.microbatch, s.chunk});
    }
    BOOST_TEST(seen.size() == size_t(2 * m * v));
  }
}

BOOST_AUTO_TEST_CASE(gpipe_and_one_f_one_b_bubble_is_pp_minus_one_over_m) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const Run r = run(pipeline(4, 16, schedule));
    BOOST_TEST_CONTEXT(schedule) {
      BOOST_TEST(bubble_fraction(r) == 3.0 / 16, tt::tolerance(0.05));
    }
  }
}

BOOST_AUTO_TEST_CASE(interleaved_schedule_shrinks_bubble_by_v) {
  const Run plain = run(pipeline(4, 16, "1f1b"));
  const Run interleaved = run(pipeline(4, 16, "interleaved", 2));
  BOOST_TEST(bubble_fraction(interleaved) == 3.0 / (2 * 16), tt::tolerance(0.08));
  BOOST_TEST(interleaved.eval.iteration_time_s < plain.eval.iteration_time_s);
}

BOOST_AUTO_TEST_CASE(one_f_one_b_holds_fewer_activations_than_gpipe) {
  const Run gpipe = run(pipeline(4, 16, "gpipe"));
  const Run ofob = run(pipeline(4, 16, "1f1b"));
  // GPipe keeps all 16 micro-batches; 1F1B at most pp = 4 on the first stage.
  const double ratio = gpipe.eval.roles[0].activations_peak / ofob.eval.roles[0].activations_peak;
  BOOST_TEST(ratio == 4.0, tt::tolerance(0.02));
}

// Recomputation goes layer by layer: beside what it keeps, the backward holds one layer's recomputed
// activations (its R task allocates them, its last backward segment frees them). With one micro-batch
// the first stage's peak is there, so it is the kept activations of every layer of the stage but one
// below keeping everything. (Unfused attention: with a fused kernel selective recomputation drops
// nothing.)
BOOST_AUTO_TEST_CASE(recomputation_holds_one_layers_activations_beside_what_it_keeps) {
  const Run none = run(pipeline(4, 1, "1f1b"), {"training.attention=unfused"});
  for (const char* mode : {"selective", "full"}) {
    const Run r =
        run(pipeline(4, 1, "1f1b"), {std::string("plan.recompute=") + mode, "training.attention=unfused"});
    const int layers = r.plan.stages[0].layer_end - r.plan.stages[0].layer_begin;
    double working = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Recompute) working = t.alloc.value();
    BOOST_TEST_CONTEXT(mode) {
      BOOST_TEST(working > 0.0);
      const double saved = (none.eval.roles[0].activations_peak - r.eval.roles[0].activations_peak).value();
      BOOST_TEST(saved == (layers - 1) * working, tt::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(program_flops_add_up_to_model_flops_plus_recompute) {
  const Run r =
      run(std::string("model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
          "training: {global_batch: 64}\n"
          "plan: {tp: 2, pp: 2, dp: 4, micro_batch: 2, recompute: full, sequence_parallel: true}\n");
  double model = 0, recompute = 0;
  for (const auto& role : r.program.roles)
    for (const auto& t : role.tasks) {
      model += (t.work.gemm_flops - t.recompute_flops).value() * role.instances;
      recompute += t.recompute_flops.value() * role.instances;
    }
  // The optimizer does no GEMMs; everything else is the model's FLOPs, once.
  BOOST_TEST(model == r.program.model_flops_per_iteration.value(), tt::tolerance(1e-9));
  // Full recompute repeats every layer's forward: a third of the layers' training FLOPs.
  BOOST_TEST(recompute / model > 0.30);
  BOOST_TEST(recompute / model < 1.0 / 3);
  const Report report = make_report("t", r.program, r.eval);
  BOOST_TEST(report.metrics.hfu > report.metrics.mfu);
}

BOOST_AUTO_TEST_CASE(a_plan_that_does_not_fit_names_the_overflowing_stage) {
  const Run r = run(std::string("model: gpt3-175b\ncluster: {from: dgx-a100-80g, nodes: 4}\n") +
                    "training: {global_batch: 32}\n"
                    "plan: {tp: 8, pp: 4, dp: 1, micro_batch: 1, recompute: none}\n");
  const Report report = make_report("t", r.program, r.eval);
  BOOST_TEST(!report.metrics.fits);
  BOOST_TEST(!report.stages[report.worst_stage].fits());
  BOOST_TEST(report.metrics.peak_memory_gib > 80);
  BOOST_TEST(to_text(report).find("DOES NOT FIT") != std::string::npos);
  BOOST_TEST(to_json(report)["metrics"]["fits"] == false);
}

BOOST_AUTO_TEST_CASE(groups_on_a_one_node_pool_never_cross_nodes) {
  // Three pipeline ranks on one node of three: the tied embedding's first/last-stage pair (ranks 0
  // and 2) stays on the node, which has no network to cross.
  const Run r =
      run(std::string("model: tiny-gpt\ncluster: {from: local-cpu, pools: {local: {gpus_per_node: 3}}}\n") +
          "training: {global_batch: 8, seq_len: 64, precision: fp32}\n"
          "plan: {tp: 1, pp: 3, dp: 1, micro_batch: 1}\n");
  BOOST_TEST(std::isfinite(r.eval.iteration_time_s));
  BOOST_TEST(r.eval.iteration_time_s < 1.0);
}

// ZeRO 1 shards the optimizer state, 2 the gradients too (reduce-scattered every micro-batch) and 3
// the weights as well. ZeRO 3 gathers one layer at a time (the gather allocates it, the pass frees it),
// the next one prefetched: beside the activations it holds at most two gathered layers and one layer's
// unsharded gradients, never the whole model.
BOOST_AUTO_TEST_CASE(zero_stages_shrink_model_state_memory_in_order) {
  double previous = 1e300, zero1_peak = 0;
  for (int zero = 0; zero <= 3; ++zero) {
    const Run r = run(std::string("model: gpt3-7.5b\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
                          "training: {global_batch: 64}\nplan: {tp: 1, pp: 1, dp: 16, micro_batch: 1}\n",
                      {"plan.zero=" + std::to_string(zero)});
    const Role& role = r.program.roles[0];
    const double state = role.state.total().value();
    BOOST_TEST_INFO("ZeRO " << zero);
    BOOST_TEST(state < previous);
    previous = state;
    const double peak = r.eval.roles[0].activations_peak.value();
    if (zero == 1) zero1_peak = peak;
    if (zero == 3) {  // ZeRO 1 holds no gathered layer (ZeRO 2 holds a bucket's gradients instead)
      const double layer = role.parameters / 32 * 2;  // one of gpt3-7.5b's 32 layers, bf16 (about)
      BOOST_TEST(peak > zero1_peak + layer / 2);
      BOOST_TEST(peak < zero1_peak + 4 * layer);
    }
  }
}

BOOST_AUTO_TEST_CASE(dp_buckets_overlap_the_backward_when_asked) {
  const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n") +
                           "training: {global_batch: 64}\nplan: {tp: 1, pp: 1, dp: 32, micro_batch: 2}\n";
  const Run overlapped = run(base, {"plan.overlap.dp=true"});
  const Run serial = run(base, {"plan.overlap.dp=false"});
  BOOST_TEST(overlapped.eval.iteration_time_s < serial.eval.iteration_time_s);
  const auto& b = overlapped.eval.roles[0].breakdown;
  BOOST_TEST(b.exposed_comm_s < b.dp_comm_s);
}

BOOST_AUTO_TEST_CASE(eager_kernels_and_the_fused_loss_reach_every_layers_backward_and_the_head) {
  // training.kernels eager adds cost::eager_autograd_backward to every layer's backward task (ZeRO 3:
  // one task per layer; one micro-batch here); training.cross_entropy fused charges the head 2 + 4
  // bytes a bf16 logit where the unfused passes charged 22 + 26.
  const std::string base =
      std::string("model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n") +
      "training: {global_batch: 64}\nplan: {tp: 1, pp: 1, dp: 32, micro_batch: 2, zero: 3}\n";
  const Run fused = run(base), eager = run(base, {"training.kernels=eager"}),
            fused_loss = run(base, {"training.cross_entropy=fused"});
  const auto bytes = role_elementwise_bytes;
  const cost::LayerWork w = cost::layer_work(eager.s.training, 2, 1, 1, false, 1, false);
  const double per_layer = cost::eager_autograd_backward(eager.s.model, w, false).elementwise_bytes.value();
  BOOST_TEST_REQUIRE(per_layer > 0);
  BOOST_TEST(bytes(eager) - bytes(fused) == per_layer * eager.s.model.layers, tt::tolerance(1e-9));
  BOOST_TEST(eager.eval.iteration_time_s > fused.eval.iteration_time_s);
  const double logits = 2.0 * fused.s.training.seq_len * fused.s.model.vocab;
  BOOST_TEST(bytes(fused) - bytes(fused_loss) == (48 - 6) * logits, tt::tolerance(1e-9));
  BOOST_TEST(fused_loss.eval.iteration_time_s < fused.eval.iteration_time_s);
  BOOST_CHECK_THROW(run(base, {"training.kernels=eagre"}), InputError);
  BOOST_CHECK_THROW(run(base, {"training.projections=seperate"}), InputError);
  BOOST_CHECK_THROW(run(base, {"training.rotary=rotation_matirx"}), InputError);
  BOOST_CHECK_THROW(run(base, {"training.cross_entropy=fusd"}), InputError);
}

BOOST_AUTO_TEST_CASE(the_rotation_matrix_rotary_embedding_reaches_every_layers_forward_and_backward) {
  // training.rotary rotation_matrix (fms's RotaryEmbedding) under eager kernels: each layer's forward and
  // backward task carry its traffic in place of the complex product's; compiled, nothing changes.
  const std::string base = std::string("model: llama3-8b\ncluster: {from: dgx-h100, nodes: 1}\n") +
                           "training: {global_batch: 8, seq_len: 4096, kernels: eager}\nplan: {tp: 1, pp: 1, "
                           "dp: 8, micro_batch: 1, zero: 3}\n";
  const Run complex = run(base), matrix = run(base, {"training.rotary=rotation_matrix"});
  const ModelSpec& m = complex.s.model;
  const cost::LayerWork wc = cost::layer_work(complex.s.training, 1, 1, 1, false, 1, false);
  const cost::LayerWork wm = cost::layer_work(matrix.s.training, 1, 1, 1, false, 1, false);
  BOOST_TEST_REQUIRE((wm.rotary == Rotary::RotationMatrix && wc.rotary == Rotary::Complex));
  const double per_layer = cost::layer_forward(m, wm, false).elementwise_bytes.value() -
                           cost::layer_forward(m, wc, false).elementwise_bytes.value() +
                           cost::layer_backward(m, wm, false).elementwise_bytes.value() -
                           cost::layer_backward(m, wc, false).elementwise_bytes.value();
  BOOST_TEST_REQUIRE(per_layer > 0);
  BOOST_TEST(role_elementwise_bytes(matrix) - role_elementwise_bytes(complex) == per_layer * m.layers,
             tt::tolerance(1e-9));
  BOOST_TEST(matrix.eval.iteration_time_s > complex.eval.iteration_time_s);
  const Run compiled = run(base, {"training.kernels=fused"}),
            compiled_matrix = run(base, {"training.kernels=fused", "training.rotary=rotation_matrix"});
  BOOST_TEST(role_elementwise_bytes(compiled_matrix) == role_elementwise_bytes(compiled));
}

BOOST_AUTO_TEST_CASE(
    the_gradient_buffer_takes_the_embedding_gradient_each_micro_batch_and_is_zeroed_each_step) {
  // ZeRO 1 keeps a whole-step gradient buffer (Megatron-Core's main_grad): the optimizer's task zeroes
  // it over every parameter of the rank (g bytes each) and the embedding's backward adds its dense
  // V x h gradient into it each micro-batch (2 g + e bytes a parameter). fp32 gradients against bf16
  // ones: 2 more bytes a parameter zeroed, 4 more a table entry a micro-batch. ZeRO 3 has no such buffer.
  const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n") +
                           "training: {global_batch: 256}\nplan: {tp: 1, pp: 1, dp: 32, micro_batch: 2}\n";
  const Run fp32 = run(base, {"plan.zero=1", "training.grad_reduce=fp32"}),
            bf16 = run(base, {"plan.zero=1", "training.grad_reduce=bf16"}),
            sharded = run(base, {"plan.zero=3", "training.grad_reduce=fp32"});
  const auto bytes = [](const Run& r, bool optimizer) {
    double b = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if ((t.kind == TaskKind::Optimizer) == optimizer)
        b += optimizer ? t.work.launches : t.work.elementwise_bytes.value();
    return b;
  };
  // The step's own two kernels and the zeroing; the zeroing's bytes count with the step's.
  BOOST_TEST(bytes(fp32, true) == 3);
  BOOST_TEST(bytes(sharded, true) == 2);
  const auto step = [](const Run& r) {
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Optimizer) return t.work.optimizer_bytes.value();
    return 0.0;
  };
  const double params = fp32.program.roles[0].parameters;
  const double adamw_bf16 = cost::optimizer_step(params / 32, bf16.s.training).optimizer_bytes.value();
  BOOST_TEST(step(bf16) - adamw_bf16 == 2 * params, tt::tolerance(1e-9));
  const double table = double(fp32.s.model.vocab) * fp32.s.model.hidden;
  BOOST_TEST(bytes(fp32, false) - bytes(bf16, false) == 4 * (2 * 2) * table, tt::tolerance(1e-9));
  BOOST_TEST(fp32.eval.iteration_time_s > bf16.eval.iteration_time_s);
}

BOOST_AUTO_TEST_CASE(deepspeeds_bf16_optimizer_copies_every_gradient_into_its_buffer_each_micro_batch) {
  // training.grad_accumulation copy (DeepSpeed's BF16_Optimizer): after every micro-batch's backward,
  // each parameter's bf16 gradient is upcast and added into the fp32 buffer (18 bytes a parameter, in
  // place of the embedding's main_grad add: 10 bytes a table entry), and the bf16 gradients stay held
  // beside the buffer (2 bytes a parameter). ZeRO 3 has no whole buffer: nothing changes there.
  const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n") +
                           "training: {global_batch: 256, grad_reduce: fp32}\n"
                           "plan: {tp: 1, pp: 1, dp: 32, micro_batch: 2}\n";
  const Run in_place = run(base, {"plan.zero=1"}),
            copy = run(base, {"plan.zero=1", "training.grad_accumulation=copy"});
  const auto backward_bytes = [](const Run& r) {
    double b = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Backward) b += t.work.elementwise_bytes.value();
    return b;
  };
  const double params = copy.program.roles[0].parameters;
  const double table = double(copy.s.model.vocab) * copy.s.model.hidden;
  const int microbatches = 256 / (32 * 2);
  BOOST_TEST(backward_bytes(copy) - backward_bytes(in_place) == microbatches * (18 * params - 10 * table),
             tt::tolerance(1e-9));
  BOOST_TEST(
      copy.program.roles[0].state.gradients.value() - in_place.program.roles[0].state.gradients.value() ==
          2 * params,
      tt::tolerance(1e-9));
  BOOST_TEST(copy.eval.iteration_time_s > in_place.eval.iteration_time_s);
  const Run sharded = run(base, {"plan.zero=3"}),
            sharded_copy = run(base, {"plan.zero=3", "training.grad_accumulation=copy"});
  BOOST_TEST(backward_bytes(sharded_copy) == backward_bytes(sharded));
  BOOST_TEST(sharded_copy.program.roles[0].state.gradients.value() ==
             sharded.program.roles[0].state.gradients.value());
  // Nothing to copy without a 16-bit precision and fp32 gradients.
  BOOST_CHECK_THROW(run(base, {"training.grad_reduce=bf16", "training.grad_accumulation=copy"}), InputError);
  BOOST_CHECK_THROW(run(base, {"training.grad_accumulation=copied"}), InputError);
}

BOOST_AUTO_TEST_CASE(launch_blocking_pays_the_host_per_kernel_and_overlaps_nothing) {
  // CUDA_LAUNCH_BLOCKING=1: every kernel costs efficiency.synchronous_launch more, and a rank runs its
  // tasks one after another in issue order (DP buckets, ZeRO 3's prefetched gathers and TP collectives
  // no longer beside compute), so with pp 1 (no wait on another rank) a step is the sum of its tasks.
  for (const char* zero : {"plan.zero=1", "plan.zero=3"}) {
    const std::string base =
        std::string("model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n") +
        "training: {global_batch: 64}\nplan: {tp: 2, pp: 1, dp: 16, micro_batch: 2}\n";
    const Run async = run(base, {zero});
    const Run blocking = run(base, {zero, "training.launch_blocking=true"});
    const std::vector<Task>& a = async.program.roles[0].tasks;
    const std::vector<Task>& b = blocking.program.roles[0].tasks;
    BOOST_TEST_REQUIRE(a.size() == b.size());
    const ClusterSpec& cluster = blocking.s.cluster;
    const PoolSpec& pool = cluster.pools[0];
    const double per_kernel = cluster.device_of(pool).efficiency.synchronous_launch.value();
    const Precision precision = blocking.s.training.precision;
    double launches = 0, added = 0, blocking_sum = 0, async_sum = 0;
    bool chained = true;
    for (size_t i = 0; i < b.size(); ++i) {
      const double da = task_duration_s(a[i], pool, cluster, precision);
      const double db = task_duration_s(b[i], pool, cluster, precision);
      launches += b[i].work.launches;
      added += db - da;
      blocking_sum += db;
      async_sum += da;
      if (i > 0) chained = chained && b[i].deps.contains(static_cast<int>(i) - 1);
    }
    BOOST_TEST_REQUIRE(launches > 1000);
    BOOST_TEST(added == launches * per_kernel, tt::tolerance(1e-9));
    BOOST_TEST(chained);
    BOOST_TEST(blocking.eval.iteration_time_s == blocking_sum, tt::tolerance(1e-9));
    BOOST_TEST(blocking.eval.iteration_time_s == async_sum + launches * per_kernel, tt::tolerance(1e-9));
    BOOST_TEST(async.eval.iteration_time_s < async_sum);  // asynchronous launches overlap some of it
  }
}

BOOST_AUTO_TEST_CASE(fp32_gradient_reduction_doubles_a_bf16_runs_dp_gradient_bytes) {
  // The same gradients in fp32: twice the bytes in every DP reduction (ZeRO 1's buckets and ZeRO 3's
  // per-unit reduce-scatters), twice the gradient memory, and a step no faster.
  for (const char* zero : {"plan.zero=1", "plan.zero=3"}) {
    const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
                             "training: {global_batch: 64}\nplan: {tp: 1, pp: 1, dp: 16, micro_batch: 2}\n";
    const Run bf16 = run(base, {zero});
    const Run fp32 = run(base, {zero, "training.grad_reduce=fp32"});
    auto reduced = [](const Run& r) {
      double bytes = 0;
      for (const Task& t : r.program.roles[0].tasks)
        if (t.purpose == Purpose::GradientReduce) bytes += t.bytes.value() * t.count;
      return bytes;
    };
    BOOST_TEST_REQUIRE(reduced(bf16) > 0);
    BOOST_TEST(reduced(fp32) == 2 * reduced(bf16), tt::tolerance(1e-9));
    BOOST_TEST(
        fp32.program.roles[0].state.gradients.value() == 2 * bf16.program.roles[0].state.gradients.value(),
        tt::tolerance(1e-9));
    BOOST_TEST(fp32.eval.iteration_time_s >= bf16.eval.iteration_time_s);
  }
}

BOOST_AUTO_TEST_CASE(experts_are_reduced_and_gathered_over_their_replicas_only) {
  // dp 16 with ep 4 on 2 nodes: each expert has 4 replicas, every 4th DP rank, which alone reduce its
  // gradients and gather its ZeRO shards, each bucket's experts' part after its dense part on the DP stream.
  // With ep 16 each expert has one holder: its gradients and weights never travel.
  const std::string base =
      "model: {name: moe, layers: 4, hidden: 256, heads: 8, ffn_hidden: 512, vocab: 2048, seq_len: 512,\n"
      "        tied_embeddings: false, moe: {experts: 16, top_k: 2}}\n"
      "cluster: {from: dgx-a100-80g, nodes: 2}\ntraining: {global_batch: 32, seq_len: 512}\n"
      "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 1}\n";
  for (const char* zero : {"plan.zero=0", "plan.zero=1", "plan.zero=3"})
    for (const char* ep : {"plan.ep=4", "plan.ep=16"}) {
      BOOST_TEST_CONTEXT(zero << ", " << ep) {
        const Run r = run(base, {zero, ep});
        BOOST_TEST(verify(r.program).empty());
        const RankParameters held = plan_rank_parameters(r.plan, r.s.model, r.s.training, 0);
        BOOST_TEST_REQUIRE(held.experts > 0);
        const bool replicated = r.plan.ep == 4;
        // Per purpose, the bytes over each group, in elements of the gradient or gathered weight.
        std::map<std::pair<Purpose, GroupKind>, double> moved;
        const std::vector<Task>& tasks = r.program.roles[0].tasks;
        for (size_t i = 0; i < tasks.size(); ++i) {
          const Task& t = tasks[i];
          if (t.purpose == Purpose::None || t.purpose == Purpose::GradientNorm) continue;
          const double elem = t.purpose == Purpose::GradientReduce
                                  ? cost::gradient_bytes(r.s.training)
                                  : cost::gathered_weight_bytes(r.s.training);
          moved[{t.purpose, t.group}] += t.bytes.value() / elem;
          if (t.group != GroupKind::ExpertDp) continue;
          BOOST_TEST(t.placement.size == 4);
          BOOST_TEST(t.placement.per_node == 2);  // every 4th of a node's 8 GPUs
          // Issued right after the dense part of the same span, on the same dependencies.
          const Task& dense = tasks[i - 1];
          BOOST_TEST((dense.group == GroupKind::Dp && dense.purpose == t.purpose && dense.deps == t.deps));
          BOOST_TEST((dense.layer_begin == t.layer_begin && dense.microbatch == t.microbatch));
        }
        const double step_gathers = r.plan.zero == 1 ? 1 : 0;
        const double reduces = r.plan.zero == 3 ? r.plan.num_microbatches : 1;
        const double gathers = r.plan.zero == 3 ? 2 * r.plan.num_microbatches : step_gathers;
        const double dense = held.total - held.experts, experts = replicated ? held.experts : 0;
        const auto over = [&](Purpose p, GroupKind g) { return moved[std::pair(p, g)]; };
        BOOST_TEST(over(Purpose::GradientReduce, GroupKind::Dp) == reduces * dense, tt::tolerance(1e-9));
        BOOST_TEST(over(Purpose::GradientReduce, GroupKind::ExpertDp) == reduces * experts,
                   tt::tolerance(1e-9));
        const Purpose gather = r.plan.zero == 3 ? Purpose::PassGather : Purpose::ParameterGather;
        BOOST_TEST(over(gather, GroupKind::Dp) == gathers * dense, tt::tolerance(1e-9));
        BOOST_TEST(over(gather, GroupKind::ExpertDp) == gathers * experts, tt::tolerance(1e-9));
      }
    }
  // The replicas of rank 5's experts: the DP ranks at its place in their EP groups.
  Plan p;
  p.dp = 16, p.ep = 4;
  BOOST_TEST(group_members(p, 5, GroupKind::ExpertDp) == (std::vector<int>{1, 5, 9, 13}), tt::per_element());
  // Under cp 2 they are runs of the 2 CP ranks, every 4th DP rank: 2 on each of two 8-GPU nodes.
  const ScenarioSpec two_nodes = scenario(base);
  p.dp = 8, p.cp = 2;
  BOOST_TEST(group_members(p, 0, GroupKind::ExpertDp) == (std::vector<int>{0, 1, 8, 9}), tt::per_element());
  const cost::GroupPlacement g =
      group_placement(p, GroupKind::ExpertDp, two_nodes.cluster.pools.front(), two_nodes.cluster);
  BOOST_TEST(g.size == 4);
  BOOST_TEST(g.per_node == 2);
}

BOOST_AUTO_TEST_CASE(fp8_weight_gathers_carry_one_byte_a_weight) {
  // ZeRO 3's per-unit gathers and ZeRO 1's gather after the step, fp8 weights against bf16 ones.
  for (const auto& [zero, purpose] :
       {std::pair{"plan.zero=1", Purpose::ParameterGather}, std::pair{"plan.zero=3", Purpose::PassGather}}) {
    const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 2}\n") +
                             "training: {global_batch: 64, precision: fp8}\n"
                             "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2}\n";
    const Run bf16 = run(base, {zero});
    const Run fp8 = run(base, {zero, "training.fp8_param_gather=true"});
    auto gathered = [purpose](const Run& r) {
      double bytes = 0;
      for (const Task& t : r.program.roles[0].tasks)
        if (t.purpose == purpose) bytes += t.bytes.value() * t.count;
      return bytes;
    };
    BOOST_TEST_REQUIRE(gathered(bf16) > 0);
    BOOST_TEST(gathered(fp8) == gathered(bf16) / 2, tt::tolerance(1e-9));
    BOOST_TEST(fp8.eval.iteration_time_s <= bf16.eval.iteration_time_s);
  }
  // Only fp8 training casts its weights to fp8.
  BOOST_CHECK_THROW(scenario("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 2}\n"
                             "training: {global_batch: 64, precision: bf16, fp8_param_gather: true}\n"),
                    InputError);
}

BOOST_AUTO_TEST_CASE(transformer_engine_casts_the_rank_weights_to_fp8_once_a_step) {
  // The optimizer step's task carries the weights' cast-transpose (4 bytes a linear weight under
  // delayed scaling, 6 under current scaling's amax pass); torchao casts every micro-batch instead.
  const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 1}\n") +
                           "training: {global_batch: 16, precision: fp8}\n"
                           "plan: {tp: 2, pp: 2, dp: 2, micro_batch: 2}\n";
  auto step_bytes = [](const Run& r) {
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Optimizer) return t.work.elementwise_bytes.value();
    return 0.0;
  };
  const Run delayed = run(base), current = run(base, {"training.fp8_recipe=te_current"});
  const Run torchao = run(base, {"training.fp8_recipe=torchao_tensorwise"});
  // gpt3-1.7b: h 2304, GELU f 4h; its 24 layers over pp 2, the linears' weights 12 h^2 / tp 2 a layer.
  const double weights = 12 * 12.0 * 2304 * 2304 / 2;
  BOOST_TEST(step_bytes(delayed) - step_bytes(torchao) == 4 * weights, tt::tolerance(1e-9));
  BOOST_TEST(step_bytes(current) - step_bytes(torchao) == 6 * weights, tt::tolerance(1e-9));
  BOOST_CHECK_THROW(scenario("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 2}\n"
                             "training: {global_batch: 64, precision: bf16, fp8_recipe: te_current}\n"),
                    InputError);
}

BOOST_AUTO_TEST_CASE(fsdp_copies_add_their_bytes_to_each_units_passes) {
  // bf16 weights and gradients, fp32 reduction, dp 16, two micro-batches: per unit of P parameters
  // on the rank (its gather's bytes / 2), the forward and backward of layer 5 carry the copies
  // plan/cost/fsdp_copies.hpp lists, over those of training.fsdp none.
  const std::string base = std::string("model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
                           "training: {global_batch: 64, grad_reduce: fp32}\n"
                           "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 3}\n";
  const Run none = run(base), fsdp1 = run(base, {"training.fsdp=fsdp1"}),
            fsdp2 = run(base, {"training.fsdp=fsdp2"});
  auto bytes = [](const Run& r, TaskKind kind, int mb) {
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == kind && t.microbatch == mb && t.layer_begin == 5) return t.work.elementwise_bytes.value();
    BOOST_FAIL("no task of layer 5");
    return 0.0;
  };
  double P = 0;
  for (const Task& t : none.program.roles[0].tasks)
    if (t.purpose == Purpose::PassGather && t.layer_begin == 5) P = t.bytes.value() / 2;
  BOOST_TEST_REQUIRE(P > 0);
  const double shard = P / 16;
  auto added = [&](const Run& r, TaskKind kind, int mb) {
    return bytes(r, kind, mb) - bytes(none, kind, mb);
  };
  // FSDP2: copy-out 2 x 2P each gather, the shard's cast (4 + 2) and copy-in (2 x 2) a dp-th;
  // backward: _chunk_cat reads bf16 and writes fp32, 6P; from the second micro-batch the += 12 a shard.
  BOOST_TEST(added(fsdp2, TaskKind::Forward, 0) == 4 * P + 10 * shard, tt::tolerance(1e-9));
  BOOST_TEST(added(fsdp2, TaskKind::Backward, 0) == 10 * P + 10 * shard, tt::tolerance(1e-9));
  BOOST_TEST(added(fsdp2, TaskKind::Backward, 1) == 10 * P + 22 * shard, tt::tolerance(1e-9));
  // FSDP1: the shard's cast each gather, no copy-out; backward: the split's concatenation 4P, the cast
  // to fp32 6P, the pre-divide 8P and the post-divide 8 a shard, and the += from the second.
  BOOST_TEST(added(fsdp1, TaskKind::Forward, 0) == 6 * shard, tt::tolerance(1e-9));
  BOOST_TEST(added(fsdp1, TaskKind::Backward, 0) == 18 * P + 14 * shard, tt::tolerance(1e-9));
  BOOST_TEST(added(fsdp1, TaskKind::Backward, 1) == 18 * P + 26 * shard, tt::tolerance(1e-9));
  BOOST_TEST(fsdp2.eval.iteration_time_s > none.eval.iteration_time_s);
  // ZeRO 1 runs no per-unit copies; a misspelt choice names the nearest.
  BOOST_TEST(run(base, {"plan.zero=1", "training.fsdp=fsdp2"}).eval.iteration_time_s ==
             run(base, {"plan.zero=1"}).eval.iteration_time_s);
  try {
    scenario(base, {"training.fsdp=fsdp_2"});
    BOOST_FAIL("fsdp_2 was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("did you mean 'fsdp2'?") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(one_stage_holds_every_parameter_the_final_norm_included) {
  // The optimizer step and the DP buckets cover what count_parameters counts (the search's bounds
  // take the optimizer step of total / dp; the final norm was missing from the rank's share).
  const Run r =
      run("model: gpt2-124m\ncluster: local-cpu\n"
          "training: {global_batch: 8, seq_len: 64, precision: fp32}\n"
          "plan: {tp: 1, pp: 1, dp: 2, micro_batch: 4}\n");
  const RankParameters held = plan_rank_parameters(r.plan, r.s.model, r.s.training, 0);
  BOOST_TEST(held.total == count_parameters(r.s.model).total);
}

BOOST_AUTO_TEST_CASE(a_tied_embeddings_head_part_is_reduced_first_and_its_lookup_rows_last) {
  // GPT-2 124M (tied) under dp 2 on one stage: the head's part of the tied gradient goes with the first
  // bucket, and the last carries each replica's lookup rows (4 x 64 tokens) instead of the vocabulary.
  const std::string base =
      "model: gpt2-124m\ncluster: local-cpu\n"
      "training: {global_batch: 8, seq_len: 64, precision: fp32}\n";
  const Run dp2 = run(base + "plan: {tp: 1, pp: 1, dp: 2, micro_batch: 4}\n");
  const ModelSpec& m = dp2.s.model;
  BOOST_TEST_REQUIRE(m.tied_embeddings);
  BOOST_TEST_REQUIRE(tied_head_reduced_early(dp2.plan, m));
  const RankParameters held = plan_rank_parameters(dp2.plan, m, dp2.s.training, 0);
  BOOST_TEST_REQUIRE(held.buckets.size() >= 2u);
  const double vocab_rows = double(m.vocab) * m.hidden, lookup_rows = 2.0 * 4 * 64 * m.hidden;
  BOOST_TEST(held.buckets.front().layer_end == m.layers);
  BOOST_TEST(held.buckets.front().elements >= vocab_rows);
  BOOST_TEST(held.buckets.back().layer_begin == 0);
  BOOST_TEST(held.buckets.back().elements < vocab_rows);
  double reduced = 0;
  for (const GradientBucket& b : held.buckets) reduced += b.elements;
  BOOST_TEST(reduced == held.total + lookup_rows);
  // One replica, or the embedding and the head on two stages: nothing to move.
  const Run dp1 =
      run(base + "plan: {tp: 1, pp: 1, dp: 1, micro_batch: 4}\n", {"cluster.pools.local.gpus_per_node=1"});
  BOOST_TEST(!tied_head_reduced_early(dp1.plan, m));
  const Run pp2 = run(base + "plan: {tp: 1, pp: 2, dp: 1, micro_batch: 4}\n");
  BOOST_TEST(!tied_head_reduced_early(pp2.plan, m));
}

BOOST_AUTO_TEST_CASE(plan_file_round_trip_is_exact) {
  ScenarioSpec s =
      scenario(std::string("model: gpt3-175b\ncluster: {from: dgx-a100-80g, nodes: 128}\n") +
               "training: {global_batch: 1536}\n"
               "plan: {tp: 8, pp: 8, dp: 16, micro_batch: 1, schedule: interleaved, virtual_stages: 2,"
               " recompute: selective, sequence_parallel: true, zero: 1,"
               " compression: {kind: topk, ratio: 0.01, warmup_steps: 10}, bucket_size: 40MB}\n");
  const Plan plan = complete_plan(s);
  const std::string path = (std::filesystem::temp_directory_path() / "paratwin_plan_roundtrip.yaml").string();
  std::ofstream(path) << to_yaml(plan);
  const Plan back = load_plan_file(path, s);
  BOOST_TEST((back == plan));
  BOOST_TEST(to_yaml(back) == to_yaml(plan));
}

BOOST_AUTO_TEST_CASE(verify_reports_every_problem_at_once) {
  ScenarioSpec s = scenario(std::string("model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 4}\n") +
                            "training: {global_batch: 512}\nplan: {tp: 2, pp: 2, dp: 8, micro_batch: 4}\n");
  Plan p = complete_plan(s);
  p.stages[1].layer_begin = 13;  // a gap after stage 0
  p.num_microbatches = 3;        // 8 x 4 x 3 != 512
  p.stages[1].pool = "nowhere";
  p.sequence_parallel = true;
  s.model.ffn_hidden = 9001;  // tp 2 splits neither these FFN units
  s.training.seq_len = 2047;  // nor a sequence under SP
  const auto problems = verify(p, s.model, s.cluster, s.training);
  BOOST_TEST(problems.size() >= 3u);
  std::string all;
  for (const auto& x : problems) all += x + "\n";
  BOOST_TEST(all.find("without gaps") != std::string::npos);
  BOOST_TEST(all.find("global batch is 512") != std::string::npos);
  BOOST_TEST(all.find("unknown pool 'nowhere'") != std::string::npos);
  BOOST_TEST(all.find("tp=2 must divide the 9001 FFN units") != std::string::npos);
  BOOST_TEST(all.find("sequence_parallel splits each sequence's 2047 tokens") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sixteen_thousand_gpus_lower_to_one_role_per_stage) {
  const Run r = run(
      std::string("model: llama3-405b\ncluster: h100-roce\ntraining: {global_batch: 2048, seq_len: 8192}\n") +
      "plan: {tp: 8, pp: 16, dp: 128, micro_batch: 1, schedule: interleaved, virtual_stages: 2,"
      " recompute: selective, sequence_parallel: true, zero: 1}\n");
  BOOST_TEST(r.program.world == 16384);
  BOOST_TEST(r.program.roles.size() == 16u);
  BOOST_TEST(r.program.task_count() < 20000u);
}

// Golden Program texts: a small plan of each schedule.
BOOST_AUTO_TEST_CASE(program_text_matches_golden_files) {
  const char* update_golden = std::getenv("PARATWIN_UPDATE_GOLDEN");
  const bool update = update_golden && std::string(update_golden) != "0" && *update_golden;
  for (const auto& [name, schedule, v] : {std::tuple{"gpipe", "gpipe", 1}, std::tuple{"1f1b", "1f1b", 1},
                                          std::tuple{"interleaved", "interleaved", 2}}) {
    const Run r =
        run(std::string("model: tiny-gpt\ncluster: {from: dgx-a100-80g, nodes: 1}\n") +
            "training: {global_batch: 16, seq_len: 128}\n"
            "plan: {tp: 2, pp: 2, dp: 2, micro_batch: 4, schedule: " +
            schedule + ", virtual_stages: " + std::to_string(v) + ", sequence_parallel: true, zero: 1}\n");
    const std::string text = to_text(r.program);
    const std::string path = std::string(PARATWIN_TEST_DIR) + "/golden/program-" + name + ".txt";
    if (update) std::ofstream(path) << text;
    std::ifstream in(path);
    std::stringstream expected;
    expected << in.rdbuf();
    BOOST_TEST_CONTEXT(path) {
      BOOST_TEST(text == expected.str());
    }
  }
}

// verify(Program): what lowering makes is sound, DP tasks say what they are for and which layers they
// cover, and a broken Program has every problem reported at once.
namespace {

const char* kTinyOnTwoNodes =
    "model: tiny-gpt\ncluster: {from: dgx-a100-80g, nodes: 2}\ntraining: {global_batch: 32, seq_len: 128}\n";

// Tasks of a role by purpose.
std::vector<size_t> tasks_for(const Role& role, Purpose purpose) {
  std::vector<size_t> out;
  for (size_t i = 0; i < role.tasks.size(); ++i)
    if (role.tasks[i].purpose == purpose) out.push_back(i);
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_lowered_layout_verifies_and_its_buckets_cover_each_layer_once) {
  for (const std::string plan :
       {"{tp: 2, pp: 2, dp: 4, micro_batch: 4, schedule: 1f1b, bucket_size: 200KB}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, schedule: interleaved, virtual_stages: 2, zero: 1}",
        "{tp: 2, pp: 1, dp: 8, micro_batch: 4, zero: 2, offload: {optimizer: true}}",
        "{tp: 1, pp: 2, dp: 8, micro_batch: 2, zero: 3, recompute: full, offload: {activations: true}}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1, compression: {kind: topk, ratio: 0.01}}",
        "{tp: 1, pp: 1, dp: 16, micro_batch: 2, bucket_size: 200KB, overlap: {dp: false}}"}) {
    const Run r = run(std::string(kTinyOnTwoNodes) + "plan: " + plan + "\n");
    BOOST_TEST_CONTEXT(plan) {
      BOOST_TEST(joined(verify(r.program)) == "");
      for (const Role& role : r.program.roles) {
        // The buckets' spans, laid side by side, are the role's layers, each once a step, or once a
        // micro-batch where ZeRO 2 and 3 reduce-scatter every micro-batch's gradients.
        const bool every =
            (r.plan.zero == 2 || r.plan.zero == 3) && r.plan.compression.kind == CompressionKind::None;
        std::vector<int> reduced;
        for (Purpose p : {Purpose::GradientReduce, Purpose::GradientTopK})
          for (size_t i : tasks_for(role, p))
            for (int l = role.tasks[i].layer_begin; l < role.tasks[i].layer_end; ++l) reduced.push_back(l);
        std::sort(reduced.begin(), reduced.end());
        std::vector<int> layers;
        for (int mb = 0; mb < (every ? r.plan.num_microbatches : 1); ++mb)
          for (int c = role.pipeline_rank; c < r.plan.chunks(); c += r.plan.pp)
            for (int l = r.plan.stages[size_t(c)].layer_begin; l < r.plan.stages[size_t(c)].layer_end; ++l)
              layers.push_back(l);
        std::sort(layers.begin(), layers.end());
        BOOST_TEST(reduced == layers);
        BOOST_TEST(tasks_for(role, Purpose::ParameterGather).size() ==
                   (r.plan.zero == 1 || r.plan.zero == 2 ? 1u : 0u));
        // ZeRO 3: one gather of each layer before each forward and each backward of every micro-batch.
        BOOST_TEST(tasks_for(role, Purpose::PassGather).size() ==
                   (r.plan.zero == 3
                        ? size_t(2 * r.plan.num_microbatches) * layers.size() / r.plan.num_microbatches
                        : 0u));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(verify_program_reports_every_broken_invariant_at_once) {
  Run r = run(std::string(kTinyOnTwoNodes) +
              "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1, bucket_size: 200KB}\n");
  Program& p = r.program;
  Role& role = p.roles.front();
  const std::vector<size_t> buckets = tasks_for(role, Purpose::GradientReduce);
  const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
  BOOST_REQUIRE(buckets.size() == 4u);  // one per layer
  BOOST_REQUIRE(gathers.size() == 1u);
  role.tasks[buckets[0]].purpose = Purpose::None;                           // a bucket without a purpose
  role.tasks[buckets[1]].layer_begin = role.tasks[buckets[2]].layer_begin;  // two buckets reduce a layer
  role.tasks[buckets[2]].collective = cost::CollectiveKind::AllReduce;      // ZeRO 1 reduce-scatters
  role.tasks[gathers[0]].deps = {};                                         // a gather before the step
  role.tasks[5].deps.push_back(7);                                          // waits for a later task
  const std::string all = joined(verify(p));
  BOOST_TEST_MESSAGE(all);
  BOOST_TEST(all.find("'RS dp bucket0': has no purpose") != std::string::npos);
  BOOST_TEST(all.find("reduces layer 3 of chunk 0 in no gradient bucket") != std::string::npos);
  BOOST_TEST(all.find("reduces layer 1, which task") != std::string::npos);
  BOOST_TEST(all.find("'RS dp bucket2': gradient-reduce must be a DP reduce-scatter (ZeRO 1-3)") !=
             std::string::npos);
  BOOST_TEST(all.find("'AG dp params': parameter-gather must wait for the optimizer step") !=
             std::string::npos);
  BOOST_TEST(all.find("task 5 '" + role.tasks[5].name +
                      "': waits for task 7, which is not an earlier task") != std::string::npos);

  // ZeRO 3: a pass whose gather lost its purpose runs layers nobody gathered for it.
  Run z = run(std::string(kTinyOnTwoNodes) + "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 3}\n");
  Role& z0 = z.program.roles.front();
  const size_t first_gather = tasks_for(z0, Purpose::PassGather).front();
  z0.tasks[first_gather].purpose = Purpose::None;
  const std::string zero3 = joined(verify(z.program));
  BOOST_TEST_MESSAGE(zero3);
  BOOST_TEST(zero3.find("has no purpose") != std::string::npos);
  BOOST_TEST(zero3.find("'F mb0 c0 L0': runs layer 0 without a ZeRO-3 gather of it before") !=
             std::string::npos);
}

// The step's gradient norm, and under fp16 the overflow flag before it: one all-reduce each over every
// rank, after every gradient reduction of the role, before its optimizer step.
BOOST_AUTO_TEST_CASE(the_step_waits_for_the_gradient_norm_over_every_rank) {
  for (const std::string precision : {"bf16", "fp16"}) {
    const Run r = run(std::string("model: tiny-gpt\ncluster: {from: dgx-a100-80g, nodes: 2}\n") +
                      "training: {global_batch: 32, seq_len: 128, precision: " + precision +
                      "}\nplan: {tp: 2, pp: 2, dp: 4, micro_batch: 2, zero: 1}\n");
    for (const Role& role : r.program.roles) {
      const std::vector<size_t> norm = tasks_for(role, Purpose::GradientNorm);
      const std::vector<size_t> flag = tasks_for(role, Purpose::OverflowCheck);
      BOOST_REQUIRE(norm.size() == 1u);
      BOOST_REQUIRE(flag.size() == (precision == "fp16" ? 1u : 0u));
      const Task& t = role.tasks[norm[0]];
      BOOST_TEST((t.kind == TaskKind::Collective && t.collective == cost::CollectiveKind::AllReduce &&
                  t.group == GroupKind::World));
      BOOST_TEST(t.placement.size == 16);
      BOOST_TEST(t.bytes.value() == 4);
      if (!flag.empty()) BOOST_TEST(t.deps.contains(int(flag[0])));
      const std::vector<size_t> reduces = tasks_for(role, Purpose::GradientReduce);
      BOOST_REQUIRE(!reduces.empty());
      const Task& first = role.tasks[flag.empty() ? norm[0] : flag[0]];
      for (size_t b : reduces) BOOST_TEST(first.deps.contains(int(b)));
      for (size_t i = 0; i < role.tasks.size(); ++i)
        if (role.tasks[i].kind == TaskKind::Optimizer) BOOST_TEST(role.tasks[i].deps.contains(int(norm[0])));
      // A collective's latency over two nodes: microseconds.
      const double s = task_duration_s(t, r.s.cluster.pools.front(), r.s.cluster, r.s.training.precision);
      BOOST_TEST(s > 1e-6);
      BOOST_TEST(s < 1e-3);
    }
  }
  // verify(Program) asks for it.
  Run r = run(std::string(kTinyOnTwoNodes) + "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, zero: 1}\n");
  Role& role = r.program.roles.front();
  role.tasks[tasks_for(role, Purpose::GradientNorm).front()].purpose = Purpose::None;
  const std::string all = joined(verify(r.program));
  BOOST_TEST(all.find("'AR world gradient norm': has no purpose") != std::string::npos);
  BOOST_TEST(all.find("has 0 gradient-norm all-reduces; one is expected") != std::string::npos);
}

// Communication kernels take SMs (PoolSpec::comm_sms, comm_sms_in_node): NCCL runs 24 channels in one
// node and 16 across nodes on the DGX H100, one SM each; kernels that run at once each hold their own.
// A compute task beside collectives that outlast it progresses at 1 - the sum of their shares.
BOOST_AUTO_TEST_CASE(collectives_hold_their_own_sms_and_one_node_ones_hold_more) {
  const ScenarioSpec s = scenario(
      "model: tiny-gpt\ncluster: {from: dgx-h100, nodes: 2}\ntraining: {global_batch: 32, seq_len: 128}\n"
      "plan: {tp: 4, dp: 4, micro_batch: 2}\n");
  Task forward;
  forward.name = "F";
  forward.work.gemms.add(cost::Gemm{8192, 8192, 8192});
  forward.work.launches = 1;
  auto collective = [](const std::string& name, StreamKind stream, int size) {
    Task t;
    t.kind = TaskKind::Collective;
    t.stream = stream;
    t.name = name;
    t.placement = {size, 8, false};
    t.bytes = Bytes(20e9);  // long enough to cover the forward
    return t;
  };
  const Task in_node = collective("AR tp", StreamKind::Tp, 8),
             across = collective("AR dp", StreamKind::Dp, 16);
  const PoolSpec& pool = s.cluster.pools.front();
  const DeviceSpec& h100 = s.cluster.device_of(pool);
  BOOST_TEST(comm_sm_share(in_node, pool, h100) == 24.0 / 132, tt::tolerance(1e-12));
  BOOST_TEST(comm_sm_share(across, pool, h100) == 16.0 / 132, tt::tolerance(1e-12));
  BOOST_TEST(comm_sm_share(forward, pool, h100) == 0);
  auto forward_time = [&](const std::vector<Task>& beside) {
    Program p;
    p.world = 16;
    Role role;
    role.pool = pool.name;
    role.instances = 16;
    role.tasks = {forward};
    for (const Task& t : beside) role.tasks.push_back(t);
    p.roles = {role};
    const TaskTiming t = schedule_tasks(p, s.cluster, s.training)[0][0];
    return t.end_s - t.start_s;
  };
  const double alone = forward_time({});
  BOOST_TEST(forward_time({in_node}) == alone / (1 - 24.0 / 132), tt::tolerance(1e-3));
  BOOST_TEST(forward_time({across}) == alone / (1 - 16.0 / 132), tt::tolerance(1e-3));
  BOOST_TEST(forward_time({in_node, across}) == alone / (1 - 40.0 / 132), tt::tolerance(1e-3));
}

// ---- TP overlap (AsyncTP, Transformer Engine userbuffers): plan/cost/tp_overlap.hpp ----

namespace {

std::string tp_overlap_plan(int tp) {
  return std::string(
             "model: {name: wide, layers: 4, hidden: 4096, heads: 32, vocab: 512, seq_len: 4096}\n"
             "cluster: {from: dgx-h100, nodes: 1}\n"
             "training: {global_batch: 16, seq_len: 4096}\n"
             "plan: {pp: 1, micro_batch: 2, sequence_parallel: true, tp: ") +
         std::to_string(tp) + ", dp: " + std::to_string(8 / tp) + "}\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(tp_overlap_runs_each_pairs_collectives_beside_its_own_gemm_pieces) {
  for (int tp : {2, 4, 8}) {
    BOOST_TEST_CONTEXT("tp " << tp) {
      const Run r = run(tp_overlap_plan(tp), {"plan.overlap.tp=true"});
      const auto& tasks = r.program.roles[0].tasks;
      const auto& timing = r.eval.roles[0].tasks;
      int forwards = 0, backwards = 0;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i].purpose != Purpose::TpGemmPieces ||
            tasks[size_t(tasks[i].deps.front())].purpose == Purpose::TpGemmPieces)
          continue;
        // The lead pieces (one in tp of each decomposed GEMM), after the pass's task that holds the rest
        // of its work; then pair by pair the other tp - 1 pieces beside that pair's collective.
        const Task& lead = tasks[i];
        BOOST_TEST(lead.deps.size() == 1u);
        std::vector<int> segment{int(i)};
        double lead_flops = 0, rest_flops = 0, segment_end = timing[i].end_s;
        int pairs = 0;
        for (size_t j = i + 1; j + 1 < tasks.size() && tasks[j].purpose == Purpose::TpGemmPieces; j += 2) {
          const Task &rest = tasks[j], &comm = tasks[j + 1];
          BOOST_REQUIRE(comm.kind == TaskKind::Collective);
          BOOST_TEST((comm.group == GroupKind::Tp));
          BOOST_TEST((comm.collective == cost::CollectiveKind::AllGather ||
                      comm.collective == cost::CollectiveKind::ReduceScatter));
          BOOST_TEST(comm.count == lead.layer_end - lead.layer_begin);  // one a layer of the pass
          for (int d : segment) {
            BOOST_TEST(rest.deps.contains(d));
            BOOST_TEST(comm.deps.contains(d));
          }
          // A pair starts when the one before it has ended, pieces and transfer: its slack hides no
          // other pair's transfer.
          BOOST_TEST(timing[j].start_s >= segment_end * (1 - 1e-12));
          BOOST_TEST(timing[j + 1].start_s >= segment_end * (1 - 1e-12));
          segment_end = std::max(timing[j].end_s, timing[j + 1].end_s);
          segment = {int(j), int(j + 1)};
          rest_flops += rest.work.gemm_flops.value();
          ++pairs;
        }
        lead_flops = lead.work.gemm_flops.value();
        BOOST_TEST(rest_flops == (tp - 1) * lead_flops, tt::tolerance(1e-9));
        // Forward (and recomputed forward): QKV and up gathered, output and down scattered; backward the
        // output and down projections' input gradients gathered.
        BOOST_TEST((pairs == 4 || pairs == 2));
        (pairs == 4 ? forwards : backwards) += 1;
      }
      BOOST_TEST(forwards >= r.plan.num_microbatches);
      BOOST_TEST(backwards >= r.plan.num_microbatches - 1);  // the last backward is cut where DP buckets end
    }
  }
}

BOOST_AUTO_TEST_CASE(tp_overlap_transfers_hold_the_sms_their_framework_gives_them) {
  // AsyncTP copies the pieces with copy engines: no SMs. Transformer Engine's ring exchange too, its
  // reduce-scatters (pipelined, and the backward's bulk ones) in a comm kernel of 16 SMs. TP collectives
  // that no overlap decomposes are NCCL's: 24 SMs in a node.
  for (const std::string how : {"async_tp", "userbuffers"}) {
    BOOST_TEST_CONTEXT(how) {
      const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true", "training.tp_overlap=" + how});
      const auto& tasks = r.program.roles[0].tasks;
      const PoolSpec& pool = r.s.cluster.pools.front();
      const DeviceSpec& h100 = r.s.cluster.device_of(pool);
      int transfers = 0, bulk = 0, whole = 0;
      for (size_t i = 1; i < tasks.size(); ++i) {
        const Task& t = tasks[i];
        if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp) continue;
        const bool scatters = t.collective == cost::CollectiveKind::ReduceScatter;
        const double share = comm_sm_share(t, pool, h100);
        if (tasks[i - 1].purpose == Purpose::TpGemmPieces) {  // a pair's transfer, beside its pieces
          ++transfers;
          BOOST_TEST(share == (how == "userbuffers" && scatters ? 16.0 / 132 : 0.0), tt::tolerance(1e-12));
        } else if (t.name.find("bulk") != std::string::npos) {
          ++bulk;
          BOOST_TEST(share == 16.0 / 132, tt::tolerance(1e-12));
        } else {
          ++whole;
          BOOST_TEST(share == 24.0 / 132, tt::tolerance(1e-12));
        }
      }
      BOOST_TEST(transfers > 0);
      BOOST_TEST((how == "userbuffers" ? bulk > 0 : bulk == 0));
      BOOST_TEST((how == "userbuffers" ? true : whole > 0));  // AsyncTP's backward reduce-scatters
    }
  }
}

BOOST_AUTO_TEST_CASE(async_tp_reduce_scatters_the_backward_s_summed_input_gradients_after_the_pass) {
  // The QKV and up projections' input gradients are sums of matmuls: AsyncTP fuses neither reduce-scatter,
  // which follow the backward's pieces (Transformer Engine runs them beside the pass: bulk).
  const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true"});
  const auto& tasks = r.program.roles[0].tasks;
  const auto& timing = r.eval.roles[0].tasks;
  int checked = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp ||
        t.collective != cost::CollectiveKind::ReduceScatter || t.name.find(" B ") == std::string::npos ||
        t.name.find("tp down") != std::string::npos || t.name.find("tp out") != std::string::npos)
      continue;
    BOOST_TEST_CONTEXT(t.name) {
      BOOST_TEST(t.count >= 2 * 4);  // two a layer (the embedding's with them)
      // After the last pieces of its pass.
      size_t j = i;
      while (j > 0 && tasks[j - 1].purpose != Purpose::TpGemmPieces) --j;
      BOOST_REQUIRE(j > 0);
      BOOST_TEST((tasks[j - 1].kind == TaskKind::Backward));
      BOOST_TEST(timing[i].start_s >= timing[j - 1].end_s * (1 - 1e-12));
    }
    ++checked;
  }
  BOOST_TEST(checked >= r.plan.num_microbatches);
}

BOOST_AUTO_TEST_CASE(userbuffers_bulk_reduce_scatters_run_beside_the_backward_not_after_its_pairs) {
  // The regather and the bulk reduce-scatters are issued before the pairs' collectives on the TP stream,
  // so they start with the backward's task, not after its pieces.
  const Run r = run(tp_overlap_plan(8), {"plan.overlap.tp=true", "training.tp_overlap=userbuffers"});
  const auto& tasks = r.program.roles[0].tasks;
  const auto& timing = r.eval.roles[0].tasks;
  int checked = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].name.rfind("RS tp bulk B ", 0) != 0) continue;
    size_t pass = i;
    while (pass > 0 &&
           !(tasks[pass - 1].kind == TaskKind::Backward && tasks[pass - 1].purpose == Purpose::None))
      --pass;
    BOOST_REQUIRE(pass > 0);
    BOOST_TEST(timing[i].start_s < timing[pass - 1].end_s);
    for (size_t j = pass; j < i; ++j) BOOST_TEST((tasks[j].purpose != Purpose::TpGemmPieces));
    ++checked;
  }
  BOOST_TEST(checked >= r.plan.num_microbatches - 1);
}

BOOST_AUTO_TEST_CASE(torchtitan_float8_tp_all_gathers_move_half_the_reduce_scatters_bytes) {
  const std::vector<std::string> fp8 = {"training.precision=fp8", "training.fp8_recipe=torchao_tensorwise",
                                        "training.tensor_parallel=dtensor"};
  for (const char* overlap : {"plan.overlap.tp=false", "plan.overlap.tp=true"}) {
    std::vector<std::string> sets = fp8;
    sets.push_back(overlap);
    const Run r = run(tp_overlap_plan(8), sets);
    double gathers = 0, scatters = 0;
    for (const Task& t : r.program.roles[0].tasks) {
      if (t.kind != TaskKind::Collective || t.group != GroupKind::Tp) continue;
      if (t.collective == cost::CollectiveKind::AllGather) gathers = t.bytes.value();
      if (t.collective == cost::CollectiveKind::ReduceScatter) scatters = t.bytes.value();
    }
    BOOST_TEST(gathers > 0);
    BOOST_TEST(gathers == scatters / 2);
  }
}

BOOST_AUTO_TEST_CASE(dtensor_gathers_no_linear_input_again_in_the_backward) {
  // Megatron's column-parallel linears keep their input's sequence shard and all-gather it again in the
  // backward; DTensor's autograd keeps the gathered input: two fewer TP all-gathers a layer's backward.
  // The TP collectives of `kind` a run issues (folded ones counted each).
  auto tp = [](const Run& r, cost::CollectiveKind kind) {
    double n = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == TaskKind::Collective && t.group == GroupKind::Tp && t.collective == kind) n += t.count;
    return n;
  };
  using cost::CollectiveKind;
  const Run megatron = run(tp_overlap_plan(8), {});
  const Run dtensor = run(tp_overlap_plan(8), {"training.tensor_parallel=dtensor"});
  const double layers = 4, backwards = megatron.plan.num_microbatches;
  BOOST_TEST(tp(megatron, CollectiveKind::AllGather) - tp(dtensor, CollectiveKind::AllGather) ==
             2 * layers * backwards);
  // The reduce-scatters stay, userbuffers' bulk ones beside the pass included.
  BOOST_TEST(tp(dtensor, CollectiveKind::ReduceScatter) == tp(megatron, CollectiveKind::ReduceScatter));
  const std::vector<std::string> bulk = {"plan.overlap.tp=true", "training.tp_overlap=userbuffers"};
  std::vector<std::string> bulk_dtensor = bulk;
  bulk_dtensor.push_back("training.tensor_parallel=dtensor");
  BOOST_TEST(tp(run(tp_overlap_plan(8), bulk_dtensor), CollectiveKind::ReduceScatter) ==
             tp(run(tp_overlap_plan(8), bulk), CollectiveKind::ReduceScatter));
  // Its copies around the collectives cost more than the regathers it saves, which ran beside compute.
  BOOST_TEST(dtensor.eval.iteration_time_s > megatron.eval.iteration_time_s);
}

BOOST_AUTO_TEST_CASE(tp_overlap_hides_part_of_the_tp_collectives_not_all) {
  const Run serial = run(tp_overlap_plan(8), {"plan.overlap.tp=false"});
  const Run overlapped = run(tp_overlap_plan(8), {"plan.overlap.tp=true"});
  const double tp_comm = serial.eval.roles[0].breakdown.tp_comm_s;
  BOOST_TEST(tp_comm > 0);
  BOOST_TEST(overlapped.eval.iteration_time_s < serial.eval.iteration_time_s);
  // Not all of it: the lead pieces, the staging kernels, the pieces' wave quantization and what the rest
  // pieces cannot cover stay on the critical path (the old model hid it all behind the whole pass).
  BOOST_TEST(overlapped.eval.iteration_time_s > serial.eval.iteration_time_s - tp_comm);
}

BOOST_AUTO_TEST_CASE(tp_overlap_leaves_plain_tp_all_reduces_after_their_gemms) {
  // Neither AsyncTP nor Transformer Engine decomposes an all-reduce: without sequence parallelism
  // overlap.tp changes nothing.
  const Run serial = run(tp_overlap_plan(4), {"plan.overlap.tp=false", "plan.sequence_parallel=false"});
  const Run overlapped = run(tp_overlap_plan(4), {"plan.overlap.tp=true", "plan.sequence_parallel=false"});
  BOOST_TEST(overlapped.eval.iteration_time_s == serial.eval.iteration_time_s, tt::tolerance(1e-12));
}

// Megatron-LM's --overlap-param-gather (plan.overlap.param_gather): ZeRO 1's gather of the updated
// parameters leaves the end of the step for the start of the next one's first forward, bucket by bucket.
BOOST_AUTO_TEST_CASE(overlapped_parameter_gathers_come_bucket_by_bucket_before_the_first_forward_needs_them) {
  const std::string base = std::string(kTinyOnTwoNodes) +
                           "plan: {tp: 1, pp: 2, dp: 8, micro_batch: 2, schedule: interleaved, "
                           "virtual_stages: 2, zero: 1, bucket_size: 200KB}\n";
  const Run after_step = run(base);
  const Run overlapped = run(base, {"plan.overlap.param_gather=true"});
  BOOST_TEST(joined(verify(overlapped.program)) == "");
  for (size_t r = 0; r < overlapped.program.roles.size(); ++r) {
    const Role& role = overlapped.program.roles[r];
    const Role& whole = after_step.program.roles[r];
    const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
    // One gather per gradient bucket, the same parameters in all as the step's one gather.
    BOOST_TEST(gathers.size() == tasks_for(role, Purpose::GradientReduce).size());
    double bytes = 0;
    for (size_t g : gathers) bytes += role.tasks[g].bytes.value();
    BOOST_TEST(bytes == whole.tasks[tasks_for(whole, Purpose::ParameterGather).front()].bytes.value(),
               tt::tolerance(1e-12));
    // Each gather after the one before it (one in flight at a time), all before the step's forwards
    // finish; the first forward of each chunk's layers waits for the gather of its bucket.
    size_t step = 0;
    for (size_t i = 0; i < role.tasks.size(); ++i)
      if (role.tasks[i].kind == TaskKind::Optimizer) step = i;
    for (size_t k = 0; k < gathers.size(); ++k) {
      const Task& g = role.tasks[gathers[k]];
      BOOST_TEST(gathers[k] < step);
      if (k > 0) BOOST_TEST(g.deps.contains(int(gathers[k - 1])));
      // (The chunk's last bucket's task spans the chunk: the live engines run the pass there.)
      bool waited_for = false;
      for (const Task& t : role.tasks)
        waited_for =
            waited_for || (t.kind == TaskKind::Forward && t.microbatch == 0 && t.chunk == g.chunk &&
                           (t.layer_begin == g.layer_begin || t.purpose != Purpose::GatheredForwardPart) &&
                           t.layer_end == g.layer_end && t.deps.contains(int(gathers[k])));
      BOOST_TEST(waited_for, "no forward of micro-batch 0 waits for '" << g.name << "'");
    }
    // The later micro-batches' forwards stay whole.
    for (const Task& t : role.tasks)
      if (t.kind == TaskKind::Forward && t.microbatch == 1)
        BOOST_TEST((t.layer_begin == overlapped.plan.stages[size_t(t.chunk)].layer_begin &&
                    t.layer_end == overlapped.plan.stages[size_t(t.chunk)].layer_end));
  }
}

BOOST_AUTO_TEST_CASE(overlapped_parameter_gather_hides_all_but_the_first_bucket_behind_the_forward) {
  // Inter-node DP with one rank a node (tp 8 fills the node): the gather is a large part of the step.
  const std::string base =
      std::string("model: gpt3-1.7b\ncluster: {from: dgx-h100, nodes: 8}\n") +
      "training: {global_batch: 32}\nplan: {tp: 8, pp: 1, dp: 8, micro_batch: 1, zero: 1, "
      "sequence_parallel: true}\n";
  const Run after_step = run(base);
  const Run overlapped = run(base, {"plan.overlap.param_gather=true"});
  const Role& role = overlapped.program.roles[0];
  const std::vector<size_t> gathers = tasks_for(role, Purpose::ParameterGather);
  BOOST_REQUIRE(gathers.size() > 2u);
  const auto durations = task_durations(overlapped.program, overlapped.s.cluster, overlapped.s.training);
  double all = 0;
  for (size_t g : gathers) all += durations[0][g];
  const double saved = after_step.eval.iteration_time_s - overlapped.eval.iteration_time_s;
  BOOST_TEST_MESSAGE("gathers " << all << " s, the first " << durations[0][gathers[0]] << " s; saved "
                                << saved << " s");
  // The first bucket's gather is exposed, the others run beside the forward: nearly all of the time
  // the exposed gather took comes off the step.
  BOOST_TEST(saved > 0.5 * (all - durations[0][gathers[0]]));
  BOOST_TEST(saved <= all * (1 + 1e-9));
  const TaskTiming& first = overlapped.eval.roles[0].tasks[gathers[0]];
  BOOST_TEST(first.start_s == 0.0);
}

BOOST_AUTO_TEST_CASE(overlapped_parameter_gather_needs_the_distributed_optimizer_and_grad_overlap) {
  ScenarioSpec s = scenario(std::string(kTinyOnTwoNodes) +
                            "plan: {tp: 1, pp: 1, dp: 16, micro_batch: 2, overlap: {param_gather: true}}\n");
  for (const auto& [zero, overlap_dp, ok] : {std::tuple{0, true, false}, std::tuple{3, true, false},
                                             std::tuple{1, false, false}, std::tuple{1, true, true}}) {
    Plan p = complete_plan(s);
    p.zero = zero;
    p.overlap_dp = overlap_dp;
    const std::string problems = joined(verify(p, s.model, s.cluster, s.training));
    BOOST_TEST((problems.find("overlap.param_gather needs zero 1 and overlap.dp") == std::string::npos) == ok,
               problems);
  }
  // The plan file says it when it is on, and reads it back.
  Plan p = complete_plan(s);
  p.zero = 1;
  BOOST_TEST(to_yaml(p).find("overlap: {dp: true, tp: false, pp: true, param_gather: true}") !=
             std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() / "paratwin_param_gather.yaml").string();
  std::ofstream(path) << to_yaml(p);
  BOOST_TEST(load_plan_file(path, s).overlap_param_gather);
}

BOOST_AUTO_TEST_CASE(megatron_core_ddp_buckets_the_first_pipeline_rank_only) {
  // training.dp_buckets first_stage: the later pipeline ranks reduce each model chunk in one bucket,
  // and under overlap.param_gather gather it in one piece from the step's start.
  const std::string base = std::string(kTinyOnTwoNodes) +
                           "plan: {tp: 1, pp: 2, dp: 8, micro_batch: 2, zero: 1, bucket_size: 200KB, "
                           "overlap: {param_gather: true}}\n";
  const Run every = run(base);
  BOOST_REQUIRE(tasks_for(every.program.roles[1], Purpose::GradientReduce).size() > 1u);
  const Run first = run(base, {"training.dp_buckets=first_stage"});
  BOOST_TEST(joined(verify(first.program)) == "");
  for (size_t r = 0; r < 2; ++r) {
    const size_t buckets = tasks_for(first.program.roles[r], Purpose::GradientReduce).size();
    const size_t gathers = tasks_for(first.program.roles[r], Purpose::ParameterGather).size();
    BOOST_TEST(buckets == (r == 0 ? tasks_for(every.program.roles[r], Purpose::GradientReduce).size() : 1u));
    BOOST_TEST(gathers == buckets);
  }
  const Role& later = first.program.roles[1];
  BOOST_TEST(first.eval.roles[1].tasks[tasks_for(later, Purpose::ParameterGather).front()].start_s == 0.0);
}

BOOST_AUTO_TEST_CASE(lowering_costs_windowed_layers_at_their_band_and_full_ones_in_full) {
  // Four layers, 1-based 1 and 3 in a 128-key window, 2 and 4 in full (Megatron-Core's
  // window_attn_skip_freq 2, GPT-OSS's pattern): the forward, the backward and the selective
  // recompute of the chunk execute two full layers' attention and two bands'.
  const std::string model =
      "model: {name: banded, layers: 4, hidden: 1024, heads: 8, vocab: 512, seq_len: 1024, "
      "position: rope, mlp: swiglu";
  const std::string rest = std::string(kFastCluster) +
                           "training: {global_batch: 4, seq_len: 1024}\n"
                           "plan: {tp: 1, pp: 1, dp: 4, micro_batch: 1, recompute: selective}\n";
  const Run full = run(model + "}\n" + rest);
  const Run banded = run(model + ", sliding_window: 128, full_attention_every: 2}\n" + rest);
  auto flash = [](const Run& r, TaskKind kind) {
    double f = 0;
    for (const Task& t : r.program.roles[0].tasks)
      if (t.kind == kind) f += t.work.flash_forward_flops.value() + t.work.flash_backward_flops.value();
    return f;
  };
  const double s = 1024, W = 128, heads = 8, d = 128;
  const double causal = 2 * heads * s * s * d, band = 4 * heads * (W * (W + 1) / 2 + (s - W) * W) * d;
  BOOST_TEST(flash(full, TaskKind::Forward) == 4 * causal, tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Forward) == 2 * causal + 2 * band, tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Backward) == 2.5 * (2 * causal + 2 * band), tt::tolerance(1e-12));
  BOOST_TEST(flash(banded, TaskKind::Recompute) == 2 * causal + 2 * band, tt::tolerance(1e-12));
  BOOST_TEST(banded.eval.iteration_time_s < full.eval.iteration_time_s);
  // The model FLOPs keep the full square.
  double model_full = 0, model_banded = 0;
  for (const Task& t : full.program.roles[0].tasks) model_full += t.work.attention_flops.value();
  for (const Task& t : banded.program.roles[0].tasks) model_banded += t.work.attention_flops.value();
  BOOST_TEST(model_banded == model_full, tt::tolerance(1e-12));
}
