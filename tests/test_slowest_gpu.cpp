// The slowest GPU of a job (plan/cost/slowest_gpu.hpp): the expected largest of the GPUs' persistent
// speed factors against its closed form at two GPUs and against the simulator's own draws
// (variability.ranks), and the analytic evaluator's compute at that pace.
#define BOOST_TEST_MODULE slowest_gpu
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "evaluated_plan.hpp"
#include "plan/cost/slowest_gpu.hpp"
#include "plan/cost/time_noise.hpp"

using namespace paratwin;
using cost::expected_slowest;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(one_gpu_or_no_spread_keeps_the_nominal_pace) {
  BOOST_TEST(expected_slowest(1, 0.05) == 1.0);
  BOOST_TEST(expected_slowest(0, 0.05) == 1.0);
  BOOST_TEST(expected_slowest(4096, 0.0) == 1.0);
}

// Two iid lognormal factors of mean 1 and log-deviation s: E[max] = 2 Phi(s / sqrt 2).
BOOST_AUTO_TEST_CASE(two_gpus_match_the_closed_form) {
  for (double cv : {0.01, 0.02, 0.1, 0.3}) {
    const double s = std::sqrt(std::log1p(cv * cv));
    const double exact = 1 + std::erf(s / 2);  // 2 Phi(s / sqrt 2)
    BOOST_TEST(expected_slowest(2, cv) == exact, tt::tolerance(1e-7));
  }
}

// The simulator draws each GPU's factor from variability.ranks (draw_factor); the mean of the largest
// of n such draws over many trials must agree with the quadrature.
BOOST_AUTO_TEST_CASE(the_expectation_matches_the_simulators_draws) {
  SeededRandom random(7);
  for (int n : {8, 64, 512}) {
    constexpr int kTrials = 4000;
    double sum = 0, sum2 = 0;
    for (int t = 0; t < kTrials; ++t) {
      double largest = 0;
      for (int g = 0; g < n; ++g)
        largest = std::max(largest, draw_factor(NoiseDistribution::Lognormal, 0.05, random));
      sum += largest, sum2 += largest * largest;
    }
    const double mean = sum / kTrials, sd = std::sqrt(sum2 / kTrials - mean * mean);
    BOOST_TEST_MESSAGE(n << " GPUs: drawn " << mean << " +- " << sd / std::sqrt(kTrials) << ", expected "
                         << expected_slowest(n, 0.05));
    BOOST_TEST(std::abs(mean - expected_slowest(n, 0.05)) < 4 * sd / std::sqrt(kTrials));
  }
}

BOOST_AUTO_TEST_CASE(a_larger_job_or_spread_waits_longer) {
  double previous = 1;
  for (int n : {2, 8, 64, 512, 4096, 32768}) {
    const double f = expected_slowest(n, 0.02);
    BOOST_TEST(f > previous);
    previous = f;
  }
  BOOST_TEST(expected_slowest(64, 0.04) > expected_slowest(64, 0.02));
  // About 1 + cv x the expected largest of n standard normals (3.04 at 512: 1.061), plus the lognormal's
  // skew.
  BOOST_TEST(expected_slowest(512, 0.02) == 1.063, tt::tolerance(0.002));
}

// The evaluator's compute tasks (forward, backward, recompute, optimizer) take the pace of the job's
// expected slowest GPU; communication keeps its time; the step grows by at most that pace.
BOOST_AUTO_TEST_CASE(the_evaluator_computes_at_the_pace_of_the_slowest_gpu) {
  const std::string yaml =
      "model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 4}\n"
      "training: {global_batch: 256}\n"
      "plan: {tp: 1, pp: 1, dp: 32, micro_batch: 2, zero: 1}\n";
  paratwin_test::EvaluatedPlan r = paratwin_test::evaluated_plan(yaml, {});
  for (auto& [name, device] : r.s.cluster.devices) device.speed_cv = 0.05;
  const double pace = expected_slowest(32, 0.05);
  BOOST_TEST(pace > 1.05);
  const auto spread = task_durations(r.program, r.s.cluster, r.s.training);
  const auto nominal = task_durations(r.program, r.s.cluster, r.s.training, false);
  const Role& role = r.program.roles[0];
  int compute = 0;
  for (size_t i = 0; i < role.tasks.size(); ++i) {
    const TaskKind k = role.tasks[i].kind;
    const bool is_compute = k == TaskKind::Forward || k == TaskKind::Backward || k == TaskKind::Recompute ||
                            k == TaskKind::Optimizer;
    compute += is_compute;
    BOOST_TEST(spread[0][i] == nominal[0][i] * (is_compute ? pace : 1), tt::tolerance(1e-12));
  }
  BOOST_TEST(compute > 0);
  for (auto& [name, device] : r.s.cluster.devices) device.speed_cv = 0;
  const double before = evaluate(r.program, r.s.cluster, r.s.training).iteration_time_s;
  for (auto& [name, device] : r.s.cluster.devices) device.speed_cv = 0.05;
  const double after = evaluate(r.program, r.s.cluster, r.s.training).iteration_time_s;
  BOOST_TEST(after > before * 1.04);
  BOOST_TEST(after <= before * pace * (1 + 1e-9));
}
