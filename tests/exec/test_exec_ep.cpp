// Expert parallelism and MoE layers in the tensor/pipeline/context-parallel runner against one rank,
// run under mpirun: tiny-moe trained with its experts shared by ep ranks (tokens dispatched by
// all-to-all) follows the single rank's loss trajectory within float rounding, with ep = dp and with
// ep below dp (expert gradients reduced over their replicas), also under ZeRO 1-3 (dense parameters
// sharded over the DP group, experts over their replicas), recompute and optimizer offload, with peak
// memory ordered as the twin's; top-k compression trains near the dense run and sends the bytes the
// twin's lowering says. So do its MoE layers on pipeline stages (1F1B and interleaved), split over TP
// (with and without sequence parallelism), over CP, with ep 2 beside pp, tp or cp (also under ZeRO 1-3,
// top-k, recompute and offload), and at ep 1 with ZeRO, optimizer offload and recomputation; a run
// checkpointed under ep x tp resumes on one rank; combined 1F1B at pp 1 and under the interleaved
// schedule runs its pass order on the trajectory; MoE parallel folding (experts whole, EP over
// tp x cp x dp) follows one rank too.
#define BOOST_TEST_MODULE exec_ep
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "exec/comm/communicator.hpp"
#include "exec/run/live_run.hpp"
#include "exec/train/trainer.hpp"
#include "mpi_fixture.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/search/optimizer.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin::exec::test::mpi;
namespace fs = std::filesystem;

namespace {

struct Layout {
  int dp = 1, ep = 1, tp = 1, pp = 1, cp = 1;
  std::string schedule = "1f1b";
  bool sp = false;                      // sequence parallelism
  std::vector<std::string> extra = {};  // further overrides (ZeRO, offload)
  int world() const { return dp * tp * pp * cp; }
  std::string extras() const {
    std::string out;
    for (const std::string& o : extra) out += " " + o.substr(o.find('.') + 1);
    return out;
  }
  std::string text() const {
    return "dp" + std::to_string(dp) + " ep" + std::to_string(ep) + " tp" + std::to_string(tp) +
           (sp ? " sp" : "") + " pp" + std::to_string(pp) + " " + schedule + " cp" + std::to_string(cp) +
           extras();
  }
};

// 8 sequences of 32 tokens per step in micro-batches of 2; 100 KB buckets (several per step).
ScenarioSpec scenario(const Layout& l) {
  std::vector<std::string> sets = {
      "training.global_batch=8",
      "training.seq_len=32",
      "plan.micro_batch=2",
      "plan.bucket_size=100KB",
      "plan.ep=" + std::to_string(l.ep),
      "plan.tp=" + std::to_string(l.tp),
      "plan.pp=" + std::to_string(l.pp),
      "plan.cp=" + std::to_string(l.cp),
      "plan.schedule=" + l.schedule,
      l.schedule == "interleaved" ? "plan.virtual_stages=2" : "plan.virtual_stages=1",
      l.sp ? "plan.sequence_parallel=true" : "plan.sequence_parallel=false"};
  sets.insert(sets.end(), l.extra.begin(), l.extra.end());
  std::vector<Override> overrides;
  for (const std::string& o : sets) overrides.push_back(parse_override(o));
  return load_live_scenario(paratwin_test::source_dir() + "/scenarios/live-cpu-tiny-moe.yaml", overrides,
                            l.dp);
}

TrainOptions options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.data = paratwin_test::source_dir() + "/data/tiny-corpus.txt";
  return o;
}

struct Trained {
  std::vector<double> losses;
  double weights_spread = 0;  // the ranks' sums of squared weights after the run: (max - min) / max
  size_t ep_tasks = 0;        // the role's EP all-to-all tasks
  double ep_seconds = 0;      // their spans over the run (the exchanges inside the passes)
  double peak_bytes = 0;      // measured, the largest over the ranks
  double predicted_peak = 0;  // the twin's
  double gradient_bytes = 0;  // the gradients a rank holds, the twin's
  double dp_bytes = 0;        // rank 0's DP collectives in the last step, measured
  double predicted_dp_bytes = 0;
  int64_t resumed_from = -1;
};

// Trains on the first ranks of the job; every rank gets the result (the weights' spread: of a
// data-parallel layout without EP only, where every rank ends with the whole model; 0 otherwise).
Trained train(const Layout& l, const TrainOptions& o) {
  Trained t;
  t.losses.assign(size_t(o.steps), 0.0);
  auto group = mpi->world->split(mpi->world->rank() < l.world() ? 0 : -1);
  if (group) {
    const ScenarioSpec s = scenario(l);
    Trainer trainer(s, complete_plan(s), *group, o);
    const RunResult r = trainer.run();
    if (r.losses.size() == t.losses.size()) t.losses = r.losses;
    t.resumed_from = r.resumed_from;
    const auto& tasks = trainer.role().tasks;
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].kind != TaskKind::Collective || tasks[i].group != GroupKind::Ep) continue;
      ++t.ep_tasks;
      for (const auto& step : r.spans) t.ep_seconds += step[i].end_s - step[i].start_s;
    }
    // After a data-parallel run every rank holds the whole model.
    if (l.world() == l.dp && l.ep == 1) {
      double sum = 0;
      for (float w : trainer.weights()) sum += double(w) * double(w);
      const double most = group->allreduce_max(sum);
      t.weights_spread = (most + group->allreduce_max(-sum)) / most;
    }
    t.peak_bytes = group->allreduce_max(double(r.memory.device_peak));
    t.predicted_peak = evaluate(trainer.program(), s.cluster, s.training).roles.front().peak_memory.value();
    t.gradient_bytes = trainer.role().state.gradients.value();
    if (!r.dp_bytes.empty()) t.dp_bytes = r.dp_bytes.back();
    for (const Task& task : tasks)
      if (task.kind == TaskKind::Collective &&
          (task.group == GroupKind::Dp || task.group == GroupKind::ExpertDp))
        t.predicted_dp_bytes += task.bytes.value() * task.count;
  }
  mpi->world->broadcast(t.losses.data(), t.losses.size() * sizeof(double), 0);
  mpi->world->broadcast(&t.weights_spread, sizeof t.weights_spread, 0);
  mpi->world->broadcast(&t.ep_tasks, sizeof t.ep_tasks, 0);
  mpi->world->broadcast(&t.ep_seconds, sizeof t.ep_seconds, 0);
  double numbers[5] = {t.peak_bytes, t.predicted_peak, t.dp_bytes, t.predicted_dp_bytes, t.gradient_bytes};
  mpi->world->broadcast(numbers, sizeof numbers, 0);
  t.peak_bytes = numbers[0], t.predicted_peak = numbers[1], t.dp_bytes = numbers[2];
  t.predicted_dp_bytes = numbers[3], t.gradient_bytes = numbers[4];
  mpi->world->broadcast(&t.resumed_from, sizeof t.resumed_from, 0);
  return t;
}
Trained train(int dp, int ep, int64_t steps, const std::vector<std::string>& sets = {}, TrainOptions o = {}) {
  const TrainOptions defaults = options(steps);
  o.steps = defaults.steps;
  o.data = defaults.data;
  return train(Layout{.dp = dp, .ep = ep, .extra = sets}, o);
}
// One rank's run of 10 steps, trained once.
const Trained& single_rank() {
  static const Trained one = train(1, 1, 10);
  return one;
}

double worst_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - b[i]) / std::abs(a[i]);
    if (!(error <= worst)) worst = error;  // a NaN loss is the worst there is (std::max would drop it)
  }
  return worst;
}

// Two measured peaks closer than this share of the larger are a tie (ZeRO 1 and 2 hold the same).
constexpr double kTie = 0.02;

int order(double a, double b) {
  if (std::abs(a - b) <= kTie * std::max(a, b)) return 0;
  return a < b ? -1 : 1;
}

}  // namespace

BOOST_AUTO_TEST_CASE(expert_parallel_runs_follow_the_single_rank_trajectory) {
  const int64_t steps = 10;
  const Trained& one = single_rank();
  BOOST_TEST_REQUIRE(one.losses.back() < one.losses.front());
  BOOST_TEST(one.ep_tasks == 0u);
  for (auto [dp, ep] : {std::pair{2, 1}, {2, 2}, {4, 2}, {4, 4}}) {
    if (dp > mpi->world->size()) continue;
    const Trained got = train(dp, ep, steps);
    const double error = worst_relative_error(one.losses, got.losses);
    if (mpi->world->rank() == 0)
      std::printf(
          "dp %d ep %d: worst relative error %.2e, weights spread %s\n", dp, ep, error,
          ep == 1 ? std::to_string(got.weights_spread).c_str() : "(each rank holds its experts only)");
    BOOST_TEST_INFO("dp " << dp << " ep " << ep);
    BOOST_TEST(error < 1e-5);
    BOOST_TEST(got.weights_spread < 1e-9);  // (without EP)
    BOOST_TEST((got.ep_tasks > 0) == (ep > 1));
    BOOST_TEST((got.ep_seconds > 0) == (ep > 1));  // the profile shows the all-to-alls' time
  }
}

// Combined 1F1B (plan.overlap.ep) at pp 1: the passes in its order (a second forward before the first
// backward), each micro-batch's all-to-alls inside its passes; the same trajectory.
BOOST_AUTO_TEST_CASE(combined_1f1b_follows_the_single_rank_trajectory) {
  const Trained& one = single_rank();
  for (int dp : {2, 4}) {
    if (dp > mpi->world->size()) continue;
    const Trained got = train(dp, 2, 10, {"plan.overlap.ep=true", "plan.micro_batch=1"});
    BOOST_TEST_INFO("dp " << dp << " ep 2, combined 1F1B");
    BOOST_TEST(worst_relative_error(one.losses, got.losses) < 1e-5);
    BOOST_TEST(got.ep_tasks > 0u);
  }
}

// Combined 1F1B under the interleaved schedule: with 8 micro-batches a replica the steady state pairs
// a pass of one micro-batch with the other pass of another on both stages (the pairs' sends on the Ep
// stream, each backward's receive posted once its forward has run), on one rank's trajectory; with the
// pipeline's transfers on the compute stream and with selective recomputation too.
BOOST_AUTO_TEST_CASE(combined_1f1b_under_interleaving_follows_the_single_rank_trajectory) {
  const std::vector<std::string> batch = {"training.global_batch=16", "plan.micro_batch=1"};
  const Trained one = train(Layout{.extra = batch}, options(10));
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), batch.begin(), batch.end());
    extra.push_back("plan.overlap.ep=true");
    return Layout{.dp = 2, .ep = 2, .pp = 2, .schedule = "interleaved", .extra = extra};
  };
  for (const Layout& l : {with({}), with({"plan.overlap.pp=false"}), with({"plan.recompute=selective"})}) {
    if (l.world() > mpi->world->size()) continue;
    const Trained got = train(l, options(10));
    BOOST_TEST_INFO(l.text());
    BOOST_TEST(worst_relative_error(one.losses, got.losses) < 1e-5);
    BOOST_TEST(got.ep_tasks > 0u);
  }
}

// ep 2 x dp 2 (4 DP ranks, two EP groups of 2): each memory mode follows the single rank.
BOOST_AUTO_TEST_CASE(memory_modes_under_expert_parallelism_follow_the_single_rank_trajectory) {
  if (mpi->world->size() < 4) return;
  const Trained& one = single_rank();
  std::vector<std::pair<std::string, Trained>> runs;
  for (const char* mode :
       {"plan.zero=0", "plan.zero=1", "plan.zero=2", "plan.zero=3", "plan.recompute=selective",
        "plan.recompute=full", "plan.offload.optimizer=true"}) {
    runs.push_back({mode, train(4, 2, 10, {mode})});
    const Trained& got = runs.back().second;
    const double error = worst_relative_error(one.losses, got.losses);
    if (mpi->world->rank() == 0)
      std::printf(
          "dp 4 ep 2 %s: worst relative error %.2e, peak per rank measured %.0f B, "
          "twin %.0f B\n",
          mode, error, got.peak_bytes, got.predicted_peak);
    BOOST_TEST_INFO(mode);
    BOOST_TEST(error < 1e-5);
  }
  // Megatron-Core's recompute modules drop each MoE layer's pre-MLP norm and experts' activation beside
  // the attention core: less memory than the core alone, measured as in the twin.
  const Trained modules =
      train(4, 2, 10, {"plan.recompute=selective", "plan.recompute_modules=[core_attn, layernorm, moe_act]"});
  BOOST_TEST(worst_relative_error(one.losses, modules.losses) < 1e-5);
  const Trained& selective = runs[4].second;
  if (mpi->world->rank() == 0)
    std::printf(
        "dp 4 ep 2 selective [core_attn, layernorm, moe_act]: peak per rank measured %.0f B (core_attn "
        "alone %.0f), twin %.0f B (%.0f)\n",
        modules.peak_bytes, selective.peak_bytes, modules.predicted_peak, selective.predicted_peak);
  BOOST_TEST(modules.predicted_peak < selective.predicted_peak);
  BOOST_TEST(modules.peak_bytes < selective.peak_bytes);
  // Measured peaks follow the twin's order across ZeRO stages (ties included): ZeRO 0 holds the most,
  // ZeRO 3 (its shard of the weights, one gathered layer and one layer's gradients beside it) the
  // least. ZeRO 2 holds its partition of the gradients and the unsharded gradients of the buckets in
  // flight, which on this 4-layer model weigh about what its sharding saves: the twin puts it within a
  // tie's width of ZeRO 1 (1.8% below), so for that pair the measured difference is held to the twin's
  // instead, within 5% of the gradients.
  const double twin_difference = runs[1].second.predicted_peak - runs[2].second.predicted_peak;
  const double measured_difference = runs[1].second.peak_bytes - runs[2].second.peak_bytes;
  BOOST_TEST_INFO("ZeRO 1 - ZeRO 2: measured " << measured_difference << " B, twin " << twin_difference
                                               << " B; ZeRO 1's gradients " << runs[1].second.gradient_bytes);
  BOOST_TEST(std::abs(measured_difference - twin_difference) < 0.05 * runs[1].second.gradient_bytes);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < i; ++j) {
      if (i == 2 && j == 1) continue;
      const Trained &a = runs[size_t(i)].second, &b = runs[size_t(j)].second;
      BOOST_TEST_INFO(runs[size_t(i)].first << " vs " << runs[size_t(j)].first << ": measured "
                                            << a.peak_bytes << " vs " << b.peak_bytes << " B, twin "
                                            << a.predicted_peak << " vs " << b.predicted_peak);
      BOOST_TEST(order(a.peak_bytes, b.peak_bytes) == order(a.predicted_peak, b.predicted_peak));
    }
}

BOOST_AUTO_TEST_CASE(top_k_under_expert_parallelism_trains_near_dense_and_sends_the_twins_bytes) {
  if (mpi->world->size() < 4) return;
  const int64_t steps = 20;
  const Trained dense = train(4, 2, steps);
  const Trained sparse = train(4, 2, steps, {"plan.compression={kind: topk, ratio: 0.1}"});
  if (mpi->world->rank() == 0)
    std::printf(
        "dp 4 ep 2 top-k 10%%: loss %.4f -> %.4f, dense %.4f; DP bytes per step %.0f measured, %.0f twin; "
        "dense %.0f\n",
        sparse.losses.front(), sparse.losses.back(), dense.losses.back(), sparse.dp_bytes,
        sparse.predicted_dp_bytes, dense.dp_bytes);
  BOOST_TEST(sparse.losses.back() < sparse.losses.front());
  BOOST_TEST(std::abs(sparse.losses.back() - dense.losses.back()) < 0.05 * dense.losses.back());
  BOOST_TEST(std::abs(sparse.dp_bytes - sparse.predicted_dp_bytes) < 0.05 * sparse.predicted_dp_bytes);
  BOOST_TEST(std::abs(dense.dp_bytes - dense.predicted_dp_bytes) < 0.05 * dense.predicted_dp_bytes);
}

// MoE layers on pipeline stages and TP shards, also beside ep 2 (and cp 2): top-k compresses their DP
// buckets part by part, the dense parts' pairs to the DP group, the experts' to their replicas.
BOOST_AUTO_TEST_CASE(top_k_with_moe_layers_under_pp_tp_and_cp_trains_near_dense_and_sends_the_twins_bytes) {
  if (mpi->world->size() < 4) return;
  const char* topk = "plan.compression={kind: topk, ratio: 0.1}";
  for (const Layout& dense : {Layout{.dp = 2, .pp = 2}, Layout{.dp = 2, .tp = 2},
                              Layout{.dp = 2, .ep = 2, .pp = 2}, Layout{.dp = 2, .ep = 2, .cp = 2}}) {
    Layout sparse = dense;
    sparse.extra.push_back(topk);
    const Trained d = train(dense, options(20));
    const Trained s = train(sparse, options(20));
    if (mpi->world->rank() == 0)
      std::printf(
          "%s top-k 10%%: loss %.4f -> %.4f, dense %.4f; DP bytes per step %.0f measured, %.0f twin; "
          "dense %.0f measured, %.0f twin\n",
          dense.text().c_str(), s.losses.front(), s.losses.back(), d.losses.back(), s.dp_bytes,
          s.predicted_dp_bytes, d.dp_bytes, d.predicted_dp_bytes);
    BOOST_TEST_INFO(dense.text());
    BOOST_TEST(s.losses.back() < s.losses.front());
    BOOST_TEST(std::abs(s.losses.back() - d.losses.back()) < 0.05 * d.losses.back());
    BOOST_TEST(std::abs(s.dp_bytes - s.predicted_dp_bytes) < 0.05 * s.predicted_dp_bytes);
    BOOST_TEST(std::abs(d.dp_bytes - d.predicted_dp_bytes) < 0.05 * d.predicted_dp_bytes);
  }
}

// Checkpoints stay whole models under ZeRO with EP: a ZeRO 3 run's resumes at ZeRO 1 on one EP group
// size and the other, and follows the single rank.
BOOST_AUTO_TEST_CASE(checkpoints_of_zero_3_under_expert_parallelism_resume_anywhere) {
  if (mpi->world->size() < 4) return;
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0;
  mpi->world->broadcast(&pid, sizeof pid, 0);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("paratwin-ep-resume-" + std::to_string(long(pid)));
  if (mpi->world->rank() == 0) std::filesystem::remove_all(dir);
  mpi->world->barrier();
  TrainOptions o;
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 2;
  o.stop_after = 3;  // the newest checkpoint is step 2's
  train(4, 2, 6, {"plan.zero=3"}, o);
  o.stop_after = -1;
  o.resume = true;
  const Trained resumed = train(4, 4, 6, {"plan.zero=1"}, o);
  const Trained one = train(1, 1, 6);
  BOOST_TEST(worst_relative_error(one.losses, resumed.losses) < 1e-5);
  mpi->world->barrier();
  if (mpi->world->rank() == 0) std::filesystem::remove_all(dir);
}

// Every plan the optimizer can emit for local-cpu (every candidate of an exhaustive search, on nodes of
// 2 and 4 cores, for the dense and the MoE model) is one the live CPU backend runs.
BOOST_AUTO_TEST_CASE(every_plan_the_optimizer_can_emit_for_local_cpu_runs_live) {
  if (mpi->world->rank() != 0) return;
  for (const char* path : {"live-cpu-tiny.yaml", "live-cpu-tiny-moe.yaml"})
    for (int cores : {2, 4}) {
      const ScenarioSpec s =
          load_scenario(paratwin_test::source_dir() + "/scenarios/" + path,
                        {parse_override("plan=auto"),
                         parse_override("cluster.pools.local.gpus_per_node=" + std::to_string(cores))});
      const SearchResult r = search_plans(s, {.top = 1 << 20, .exhaustive = true});
      std::set<std::string> layouts;  // what the candidates cover
      for (const Candidate& c : r.top) {
        const Plan& p = c.plan;
        layouts.insert("tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " cp" +
                       std::to_string(p.cp) + " ep" + std::to_string(p.ep) + " zero" +
                       std::to_string(p.zero));
        const auto problems = live_cpu_limitations(p, s.model);
        BOOST_TEST_INFO(path << " on " << cores << " cores: " << to_yaml(p));
        BOOST_TEST(problems.empty());
      }
      std::printf("%s on %d cores: %zu candidates, %zu layouts, every one runs live\n", path, cores,
                  r.top.size(), layouts.size());
      BOOST_TEST(r.top.size() > 100u);
    }
}

namespace {

// Trains each layout that fits in the job for 10 steps and checks it against one rank.
void check_layouts(const std::vector<Layout>& layouts) {
  const Trained& one = single_rank();
  BOOST_TEST_REQUIRE(one.losses.back() < one.losses.front());
  for (const Layout& l : layouts) {
    if (l.world() > mpi->world->size()) continue;
    const Trained got = train(l, options(10));
    const double error = worst_relative_error(one.losses, got.losses);
    if (mpi->world->rank() == 0) std::printf("%-30s worst relative error %.2e\n", l.text().c_str(), error);
    BOOST_TEST_INFO(l.text() << ": first loss " << got.losses.front() << " vs " << one.losses.front()
                             << ", last " << got.losses.back() << " vs " << one.losses.back());
    BOOST_TEST(error < 1e-5);
    BOOST_TEST((got.ep_tasks > 0) == (l.ep > 1));
    BOOST_TEST((got.ep_seconds > 0) == (l.ep > 1));  // the profile shows the all-to-alls' time
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(moe_layers_under_tensor_pipeline_and_context_parallelism_follow_one_rank) {
  check_layouts({
      {.pp = 2},
      {.pp = 2, .schedule = "interleaved"},
      {.tp = 2},
      {.tp = 2, .sp = true},
      {.cp = 2},
      {.dp = 2, .ep = 2, .pp = 2},
      {.dp = 2, .ep = 2, .tp = 2},
      {.dp = 2, .ep = 2, .cp = 2},
  });
}

BOOST_AUTO_TEST_CASE(moe_layers_under_zero_offload_and_recomputation_with_tp_pp_or_cp_follow_one_rank) {
  check_layouts({
      {.dp = 2, .tp = 2, .extra = {"plan.zero=1"}},
      {.dp = 2, .cp = 2, .extra = {"plan.zero=2"}},
      {.dp = 2, .pp = 2, .extra = {"plan.zero=3"}},
      {.dp = 2, .pp = 2, .extra = {"plan.zero=2", "plan.offload.optimizer=true"}},
      {.pp = 2, .extra = {"plan.recompute=full"}},
      {.tp = 2, .extra = {"plan.recompute=selective"}},
      {.tp = 2,
       .extra = {"plan.recompute=selective", "plan.recompute_modules=[core_attn, layernorm, moe_act]"}},
  });
}

BOOST_AUTO_TEST_CASE(moe_layers_with_activation_offload_follow_one_rank) {
  const std::vector<std::string> offload = {"plan.offload.activations=true"};
  check_layouts({
      {.dp = 2, .ep = 2, .extra = offload},
      {.dp = 2, .extra = offload},
      {.pp = 2, .extra = offload},
      {.pp = 2, .schedule = "interleaved", .extra = offload},
      {.tp = 2, .extra = offload},
      {.cp = 2, .extra = offload},
  });
  // The MoE layers' routing and expert rows go to the host too: under pp 2 interleaved (several
  // micro-batches in flight on the first stage) offload saves memory (2.99 MB against the twin's
  // 2.11 MB on an idle machine: a live MoE layer keeps more rows than the twin's activation model).
  if (mpi->world->size() < 2) return;
  const Layout kept{.pp = 2, .schedule = "interleaved"};
  Layout away = kept;
  away.extra = offload;
  const Trained k = train(kept, options(4)), a = train(away, options(4));
  const double saved = k.peak_bytes - a.peak_bytes, predicted = k.predicted_peak - a.predicted_peak;
  if (mpi->world->rank() == 0)
    std::printf("tiny-moe pp 2 interleaved: activation offload saves %.0f B per rank, twin %.0f B\n", saved,
                predicted);
  BOOST_TEST(predicted > 0.0);
  BOOST_TEST(saved >= 0.0);  // how much: the copy thread's timing decides (test_exec_memory_modes)
}

BOOST_AUTO_TEST_CASE(expert_parallelism_beside_tp_pp_or_cp_with_recompute_and_offload_follows_one_rank) {
  check_layouts({
      {.dp = 2, .ep = 2, .pp = 2, .extra = {"plan.recompute=full"}},
      {.dp = 2, .ep = 2, .tp = 2, .extra = {"plan.recompute=selective"}},
      {.dp = 2,
       .ep = 2,
       .pp = 2,
       .extra = {"plan.recompute=selective", "plan.recompute_modules=[layernorm, moe_act]"}},
      {.dp = 2, .ep = 2, .cp = 2, .extra = {"plan.recompute=full"}},
      {.dp = 2, .ep = 2, .pp = 2, .schedule = "interleaved", .extra = {"plan.offload.optimizer=true"}},
      {.dp = 2, .ep = 2, .tp = 2, .extra = {"plan.offload.activations=true"}},
      {.dp = 2, .ep = 2, .pp = 2, .extra = {"plan.offload.activations=true", "plan.recompute=selective"}},
  });
}

// MoE parallel folding (plan.expert_tp 1): each rank's experts whole, the EP group drawn from tp x cp x dp
// (ep 2 at tp 2: the two TP ranks hold different experts), each TP rank routing its sequence-parallel
// share of the tokens; the experts' gradients reduced and ZeRO-sharded over the ranks that hold the same
// experts, the router's summed over TP.
BOOST_AUTO_TEST_CASE(folded_experts_follow_one_rank) {
  const std::string fold = "plan.expert_tp=1";
  check_layouts({
      {.ep = 2, .tp = 2, .sp = true, .extra = {fold}},
      {.dp = 2, .ep = 2, .tp = 2, .sp = true, .extra = {fold}},
      {.dp = 2, .ep = 4, .tp = 2, .sp = true, .extra = {fold, "plan.zero=1"}},
      {.dp = 2, .ep = 2, .tp = 2, .sp = true, .extra = {fold, "plan.zero=3"}},
      {.ep = 4, .tp = 2, .cp = 2, .sp = true, .extra = {fold, "plan.recompute=full"}},
      {.ep = 2,
       .tp = 2,
       .pp = 2,
       .sp = true,
       .extra = {fold, "plan.recompute=selective", "plan.recompute_modules=[layernorm, moe_act]"}},
  });
}

// Beside tp, pp or cp, ZeRO shards the dense gradients and states over the DP group (dp x cp) and the
// experts' over their replicas (under cp 2 the two CP ranks; under tp or pp, dp = ep: each rank alone).
BOOST_AUTO_TEST_CASE(expert_parallelism_beside_tp_pp_or_cp_under_zero_follows_one_rank) {
  check_layouts({
      {.dp = 2, .ep = 2, .tp = 2, .extra = {"plan.zero=1"}},
      {.dp = 2, .ep = 2, .pp = 2, .extra = {"plan.zero=2"}},
      {.dp = 2, .ep = 2, .pp = 2, .schedule = "interleaved", .extra = {"plan.zero=3"}},
      {.dp = 2, .ep = 2, .tp = 2, .sp = true, .extra = {"plan.zero=3", "plan.offload.optimizer=true"}},
      {.dp = 2, .ep = 2, .cp = 2, .extra = {"plan.zero=1"}},
      {.dp = 2, .ep = 2, .cp = 2, .extra = {"plan.zero=3", "plan.recompute=full"}},
  });
}

// ep 2 beside cp 2: the measured peaks follow the twin's order across ZeRO stages.
BOOST_AUTO_TEST_CASE(zero_beside_expert_and_context_parallelism_orders_peak_memory_as_the_twin) {
  if (mpi->world->size() < 4) return;
  std::vector<Trained> runs;
  for (int zero = 0; zero <= 3; ++zero) {
    runs.push_back(
        train({.dp = 2, .ep = 2, .cp = 2, .extra = {"plan.zero=" + std::to_string(zero)}}, options(3)));
    if (mpi->world->rank() == 0)
      std::printf("dp 2 ep 2 cp 2 zero %d: peak per rank measured %.0f B, twin %.0f B\n", zero,
                  runs.back().peak_bytes, runs.back().predicted_peak);
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < i; ++j) {
      const Trained &a = runs[size_t(i)], &b = runs[size_t(j)];
      BOOST_TEST_INFO("zero " << i << " vs " << j << ": measured " << a.peak_bytes << " vs " << b.peak_bytes
                              << " B, twin " << a.predicted_peak << " vs " << b.predicted_peak);
      BOOST_TEST(order(a.peak_bytes, b.peak_bytes) == order(a.predicted_peak, b.predicted_peak));
    }
}

BOOST_AUTO_TEST_CASE(a_run_checkpointed_under_ep_and_tp_resumes_on_one_rank) {
  if (mpi->world->size() < 4) return;
  double pid = mpi->world->rank() == 0 ? double(::getpid()) : 0;
  mpi->world->broadcast(&pid, sizeof pid, 0);
  const fs::path dir = fs::temp_directory_path() / ("paratwin-moe-resume-" + std::to_string(long(pid)));
  TrainOptions o = options(10);
  o.checkpoint_dir = dir.string();
  o.checkpoint_every = 4;
  o.stop_after = 5;  // stops after step 5; the newest checkpoint is step 4, each expert from its EP rank
  train({.dp = 2, .ep = 2, .tp = 2}, o);
  o.stop_after = -1;
  o.resume = true;
  const Trained resumed = train(Layout{}, o);
  BOOST_TEST(resumed.resumed_from == 4);
  BOOST_TEST(worst_relative_error(single_rank().losses, resumed.losses) < 1e-5);
  mpi->world->barrier();
  if (mpi->world->rank() == 0) fs::remove_all(dir);
}
