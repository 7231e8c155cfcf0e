// Expert parallelism and MoE layers in the tensor/pipeline/context-parallel runner against one rank,
// run under mpirun: tiny-moe trained with its experts shared by ep ranks (tokens dispatched by
// all-to-all) follows the single rank's loss trajectory within float rounding, with ep = dp and with
// ep below dp (expert gradients reduced over their replicas); so do its MoE layers on pipeline stages
// (1F1B and interleaved), split over TP (with and without sequence parallelism), over CP, with ep 2
// beside pp, tp or cp, and at ep 1 with ZeRO, optimizer offload and recomputation; a run checkpointed
// under ep x tp resumes on one rank.
#define BOOST_TEST_MODULE exec_ep
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "exec/comm/communicator.hpp"
#include "exec/run/live_run.hpp"
#include "exec/train/trainer.hpp"
#include "mpi_fixture.hpp"

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
  return load_live_scenario(PARATWIN_SOURCE_DIR "/scenarios/live-cpu-tiny-moe.yaml", overrides, l.dp);
}
ScenarioSpec scenario(int dp, int ep) {
  return scenario(Layout{dp, ep});
}

TrainOptions options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.data = PARATWIN_SOURCE_DIR "/data/tiny-corpus.txt";
  return o;
}

struct Trained {
  std::vector<double> losses;
  double weights_spread = 0;  // the ranks' sums of squared weights after the run: (max - min) / max
  size_t ep_tasks = 0;        // the role's EP all-to-all tasks
  double ep_seconds = 0;      // their spans over the run (the exchanges inside the passes)
  int64_t resumed_from = -1;
};

// Trains on the first ranks of the job; every rank gets the result (the weights' spread: of a layout
// on the data-parallel runner only, where every rank ends with the whole model).
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
    // After the run every rank holds the whole model (the experts gathered from their EP ranks).
    double sum = 0;
    for (float w : trainer.model().parameters()) sum += double(w) * double(w);
    const double most = group->allreduce_max(sum);
    t.weights_spread = (most + group->allreduce_max(-sum)) / most;
  }
  mpi->world->broadcast(t.losses.data(), t.losses.size() * sizeof(double), 0);
  mpi->world->broadcast(&t.weights_spread, sizeof t.weights_spread, 0);
  mpi->world->broadcast(&t.ep_tasks, sizeof t.ep_tasks, 0);
  mpi->world->broadcast(&t.ep_seconds, sizeof t.ep_seconds, 0);
  mpi->world->broadcast(&t.resumed_from, sizeof t.resumed_from, 0);
  return t;
}
Trained train(int dp, int ep, int64_t steps) {
  return train(Layout{dp, ep}, options(steps));
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
      std::printf("dp %d ep %d: worst relative error %.2e, weights spread %.1e\n", dp, ep, error,
                  got.weights_spread);
    BOOST_TEST_INFO("dp " << dp << " ep " << ep);
    BOOST_TEST(error < 1e-5);
    BOOST_TEST(got.weights_spread < 1e-9);
    BOOST_TEST((got.ep_tasks > 0) == (ep > 1));
    BOOST_TEST((got.ep_seconds > 0) == (ep > 1));  // the profile shows the all-to-alls' time
  }
}

BOOST_AUTO_TEST_CASE(expert_parallelism_refuses_what_it_does_not_run) {
  const ScenarioSpec s = scenario(2, 2);
  Plan p = complete_plan(s);
  p.zero = 1;
  const auto problems = live_cpu_limitations(p, s.model, s.training);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].find("with ep 2, ZeRO") != std::string::npos);
  p.zero = 0;
  p.tp = 2;
  BOOST_TEST(live_cpu_limitations(p, s.model, s.training).empty());
  p.ep = 1;
  p.zero = 1;
  p.stages[0].recompute = Recompute::Full;
  BOOST_TEST(live_cpu_limitations(p, s.model, s.training).empty());
  p.compression.kind = CompressionKind::TopK;
  const auto moe = live_cpu_limitations(p, s.model, s.training);
  BOOST_TEST_REQUIRE(moe.size() == 1u);
  BOOST_TEST(moe[0].find("compression is not implemented live for a mixture-of-experts model") !=
             std::string::npos);
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
  });
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
