// Expert parallelism against one rank, run under mpirun: tiny-moe trained with its experts shared by
// ep ranks (tokens dispatched by all-to-all) follows the single rank's loss trajectory within float
// rounding, with ep = dp and with ep below dp (expert gradients reduced over their replicas).
#define BOOST_TEST_MODULE exec_ep
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>

#include "exec/comm/communicator.hpp"
#include "exec/run/live_run.hpp"
#include "exec/train/trainer.hpp"
#include "mpi_fixture.hpp"

using namespace paratwin;
using namespace paratwin::exec;
using paratwin::exec::test::mpi;

namespace {

// 8 sequences of 32 tokens per step in micro-batches of 2; 100 KB buckets (several per step).
ScenarioSpec scenario(int dp, int ep) {
  const std::vector<Override> sets = {
      parse_override("training.global_batch=8"), parse_override("training.seq_len=32"),
      parse_override("plan.micro_batch=2"), parse_override("plan.bucket_size=100KB"),
      parse_override("plan.ep=" + std::to_string(ep))};
  return load_live_scenario(PARATWIN_SOURCE_DIR "/scenarios/live-cpu-tiny-moe.yaml", sets, dp);
}

struct Trained {
  std::vector<double> losses;
  double weights_spread = 0;  // the ranks' sums of squared weights after the run: (max - min) / max
  size_t ep_tasks = 0;        // the role's EP all-to-all tasks
  double ep_seconds = 0;      // their spans over the run (the exchanges inside the passes)
};

// Trains on the first dp ranks of the job; every rank gets the result.
Trained train(int dp, int ep, int64_t steps) {
  Trained t;
  t.losses.assign(size_t(steps), 0.0);
  auto group = mpi->world->split(mpi->world->rank() < dp ? 0 : -1);
  if (group) {
    const ScenarioSpec s = scenario(dp, ep);
    TrainOptions o;
    o.steps = steps;
    o.data = PARATWIN_SOURCE_DIR "/data/tiny-corpus.txt";
    Trainer trainer(s, complete_plan(s), *group, o);
    const RunResult r = trainer.run();
    t.losses = r.losses;
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
  return t;
}

double worst_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(expert_parallel_runs_follow_the_single_rank_trajectory) {
  const int64_t steps = 10;
  const Trained one = train(1, 1, steps);
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
  BOOST_TEST(live_cpu_limitations(p, s.model, s.training).front().find("tp = pp = cp = 1") != std::string::npos);
}
