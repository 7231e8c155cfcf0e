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
#include "plan/cost/slowest_gpu.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/ir/program.hpp"
#include "plan/ir/schedule.hpp"
#include "plan/report/report.hpp"
#include "plan/topology/rank_groups.hpp"
#include "program_run.hpp"
#include "source_tree.hpp"

using namespace paratwin;
namespace tt = boost::test_tools;

namespace {

using paratwin_test::run;
using paratwin_test::Run;
using paratwin_test::scenario;

// A cluster where communication is nearly free, so that pipeline timing is compute alone.
const std::string kFastCluster = paratwin_test::fast_cluster();

// Layers dominate: a deep, narrow model with a small vocabulary.
const char* kDeepModel =
    "model: {name: deep, layers: 32, hidden: 2048, heads: 16, vocab: 512, seq_len: 1024}\n";

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

BOOST_AUTO_TEST_CASE(the_report_splits_compute_and_recompute_by_kind_of_kernel) {
  const Run r = run(std::string("model: llama3-8b\ncluster: {from: dgx-h100, nodes: 1}\n") +
                    "training: {global_batch: 16, seq_len: 8192, attention: flash}\n"
                    "plan: {tp: 2, pp: 2, dp: 2, micro_batch: 1, recompute: full}\n");
  const Report report = make_report("t", r.program, r.eval);
  const TimeBreakdown& b = report.breakdown;
  BOOST_TEST(b.recompute_s > 0);
  BOOST_TEST(b.kernels.total() == b.compute_s + b.recompute_s, tt::tolerance(1e-9));
  BOOST_TEST(b.kernels.gemm_s > b.kernels.attention_s);
  BOOST_TEST(b.kernels.attention_s > b.kernels.launch_s);
  BOOST_TEST(b.kernels.memory_bound_s > 0);
  const auto kernels = to_json(report)["breakdown"]["kernels"];
  BOOST_TEST(kernels["attention_s"].get<double>() == b.kernels.attention_s);
  BOOST_TEST(to_text(report).find("(re)compute by kernel  GEMM ") != std::string::npos);
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
  // unfused (Megatron-LM's --no-gradient-accumulation-fusion): each gradient added by one kernel in the
  // same backward, 10 bytes a parameter (read 2 + 4, write 4), and freed: no 16-bit gradients held.
  const Run unfused = run(base, {"plan.zero=1", "training.grad_accumulation=unfused"});
  BOOST_TEST(backward_bytes(unfused) - backward_bytes(in_place) == microbatches * (10 * params - 10 * table),
             tt::tolerance(1e-9));
  BOOST_TEST(unfused.program.roles[0].state.gradients.value() ==
             in_place.program.roles[0].state.gradients.value());
  BOOST_TEST(unfused.eval.iteration_time_s > in_place.eval.iteration_time_s);
  BOOST_TEST(unfused.eval.iteration_time_s < copy.eval.iteration_time_s);
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
    // As scheduled: compute at the pace of the job's expected slowest GPU (task_durations).
    const auto scheduled_a = task_durations(async.program, cluster, async.s.training);
    const auto scheduled_b = task_durations(blocking.program, cluster, blocking.s.training);
    const double pace = cost::expected_slowest(blocking.program.world, cluster.device_of(pool).speed_cv);
    double launches = 0, added = 0, blocking_sum = 0, async_sum = 0;
    bool chained = true;
    for (size_t i = 0; i < b.size(); ++i) {
      const double da = task_duration_s(a[i], pool, cluster, precision);
      const double db = task_duration_s(b[i], pool, cluster, precision);
      launches += b[i].work.launches;
      added += db - da;
      blocking_sum += scheduled_b[0][i];
      async_sum += scheduled_a[0][i];
      if (i > 0) chained = chained && b[i].deps.contains(static_cast<int>(i) - 1);
    }
    BOOST_TEST_REQUIRE(launches > 1000);
    BOOST_TEST(added == launches * per_kernel, tt::tolerance(1e-9));
    BOOST_TEST(chained);
    BOOST_TEST(blocking.eval.iteration_time_s == blocking_sum, tt::tolerance(1e-9));
    BOOST_TEST(blocking.eval.iteration_time_s == async_sum + launches * per_kernel * pace,
               tt::tolerance(1e-9));
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
    const std::string path = paratwin_test::source_dir() + "/tests/golden/program-" + name + ".txt";
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
