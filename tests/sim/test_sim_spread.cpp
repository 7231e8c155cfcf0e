// The spread of iteration times: variability's draws in process, and `paratwin simulate` end to end
// with per-kernel noise and per-GPU slowness (one child process per simulation).
#define BOOST_TEST_MODULE sim_spread
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "paratwin_process.hpp"
#include "plan/cost/time_noise.hpp"
#include "plan/report/spread.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using namespace paratwin;
using namespace paratwin_test;
namespace tt = boost::test_tools;

namespace {

nlohmann::json report(const std::string& arguments) {
  const Result r = paratwin_test::paratwin(arguments + " --json -");
  BOOST_REQUIRE_MESSAGE(r.status == 0, "paratwin " + arguments + " failed: " + r.err);
  return nlohmann::json::parse(r.out);
}

std::string scenario_file(const std::string& name, const std::string& yaml) {
  const fs::path p = test_dir("paratwin_spread_") / (name + ".yaml");
  std::ofstream(p) << yaml;
  return p.string();
}

// GPT 1.7B on one node of `gpus` A100s, pure data parallel, 8 micro-batches a step: compute dominates
// and the DP all-reduce stays on the NVSwitch.
std::string data_parallel(int gpus, const std::string& variability) {
  const std::string n = std::to_string(gpus);
  return scenario_file("dp" + n, "name: dp" + n +
                                     "\nmodel: gpt3-1.7b\n"
                                     "cluster: {from: dgx-a100-80g, nodes: 1}\n"
                                     "training: {global_batch: " +
                                     std::to_string(8 * gpus) +
                                     ", seq_len: 2048}\n"
                                     "plan: {tp: 1, pp: 1, dp: " +
                                     n + ", micro_batch: 1}\n" + variability);
}

// Quickstart's model and plan shape (TP 2 inside a node) on 2 nodes.
std::string tp2(const std::string& name, const std::string& variability) {
  return scenario_file(name,
                       "name: tp2\nmodel: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 2}\n"
                       "training: {global_batch: 16, seq_len: 2048}\n"
                       "plan: {tp: 2, pp: 1, dp: 8, micro_batch: 2}\n" +
                           variability);
}

struct Moments {
  double mean = 0, sd = 0;
};

// Mean and standard deviation of the largest of `n` draws, over many trials drawn here, apart from the
// simulator.
Moments expected_maximum(const NoiseSpec& spec, int n, int trials) {
  SeededRandom random(12345);
  double sum = 0, sum2 = 0;
  for (int t = 0; t < trials; ++t) {
    double m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, draw_factor(spec.distribution, spec.cv, random));
    sum += m;
    sum2 += m * m;
  }
  const double mean = sum / trials;
  return {mean, std::sqrt(std::max(0.0, sum2 / trials - mean * mean))};
}

}  // namespace

BOOST_AUTO_TEST_CASE(draws_have_mean_1_and_the_asked_coefficient_of_variation) {
  for (const NoiseDistribution d : {NoiseDistribution::Lognormal, NoiseDistribution::Uniform}) {
    SeededRandom random(7);
    const int n = 200000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
      const double x = draw_factor(d, 0.2, random);
      BOOST_REQUIRE(x > 0);
      sum += x;
      sum2 += x * x;
    }
    const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    BOOST_TEST(mean == 1.0, tt::tolerance(0.005));
    BOOST_TEST(sd == 0.2, tt::tolerance(0.02));
  }
  SeededRandom random(7);
  BOOST_TEST(draw_factor(NoiseDistribution::Lognormal, 0, random) == 1.0);
}

BOOST_AUTO_TEST_CASE(a_kernels_draw_depends_on_what_it_is_for_not_on_the_order_of_asking) {
  VariabilitySpec v;
  v.kernel_cv.fill(0.1);
  v.kernel_cv[static_cast<int>(KernelKind::Optimizer)] = 0;
  const KernelNoise noise(v, 3);
  const double a = noise.factor(TaskKind::Forward, 5, 17, 2);
  BOOST_TEST(noise.factor(TaskKind::Backward, 1, 2, 3) != a);
  BOOST_TEST(noise.factor(TaskKind::Forward, 5, 17, 2) == a);
  BOOST_TEST(KernelNoise(v, 3).factor(TaskKind::Forward, 5, 17, 2) == a);
  BOOST_TEST(KernelNoise(v, 4).factor(TaskKind::Forward, 5, 17, 2) != a);
  BOOST_TEST(noise.factor(TaskKind::Optimizer, 5, 17, 2) == 1.0);
  BOOST_TEST(noise.factor(TaskKind::Collective, 5, 17, 2) == 1.0);
  BOOST_TEST(!KernelNoise().active());
}

BOOST_AUTO_TEST_CASE(a_steps_draw_is_shared_by_every_compute_kernel_of_a_gpus_iteration) {
  VariabilitySpec v;
  v.steps = {NoiseDistribution::Lognormal, 0.1};
  const KernelNoise noise(v, 3);
  BOOST_TEST(noise.active());
  const double a = noise.factor(TaskKind::Forward, 5, 17, 2);
  BOOST_TEST(a != 1.0);
  BOOST_TEST(noise.factor(TaskKind::Backward, 5, 3, 2) == a);
  BOOST_TEST(noise.factor(TaskKind::Optimizer, 5, 40, 2) == a);
  BOOST_TEST(noise.factor(TaskKind::Forward, 5, 17, 3) != a);
  BOOST_TEST(noise.factor(TaskKind::Forward, 6, 17, 2) != a);
  BOOST_TEST(noise.factor(TaskKind::Collective, 5, 17, 2) == 1.0);
  BOOST_TEST(noise.factor(TaskKind::Copy, 5, 17, 2) == 1.0);
  // With the kernels' own spread too, each kernel's factor is its own draw times the step's.
  v.kernel_cv.fill(0.1);
  const KernelNoise both(v, 3);
  VariabilitySpec own;
  own.kernel_cv.fill(0.1);
  BOOST_TEST(
      both.factor(TaskKind::Backward, 5, 3, 2) == a * KernelNoise(own, 3).factor(TaskKind::Backward, 5, 3, 2),
      boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_steps_draw_correlates_between_gpus_by_its_correlation) {
  // Over many iterations, two GPUs' step factors correlate (in their logarithms) by the asked share:
  // none apart, all of it together (the same factor), half between.
  for (const double rho : {0.0, 0.5, 1.0}) {
    BOOST_TEST_CONTEXT("correlation " << rho) {
      VariabilitySpec v;
      v.steps.cv = 0.1;
      v.steps.correlation = rho;
      const KernelNoise noise(v, 11);
      const int n = 4000;
      double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, mean = 0;
      for (int it = 0; it < n; ++it) {
        const double a = std::log(noise.factor(TaskKind::Forward, 0, 1, it));
        const double b = std::log(noise.factor(TaskKind::Backward, 3, 7, it));
        sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b;
        mean += noise.factor(TaskKind::Forward, 0, 1, it) / n;
      }
      const double cov = sab / n - sa / n * sb / n;
      const double r = cov / std::sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
      BOOST_TEST(std::abs(r - rho) < 0.05);  // 4000 pairs: a standard error under 0.02
      BOOST_TEST(std::abs(mean - 1) < 0.01);
      if (rho == 1.0)
        BOOST_TEST(noise.factor(TaskKind::Forward, 0, 1, 5) == noise.factor(TaskKind::Forward, 3, 1, 5),
                   boost::test_tools::tolerance(1e-12));
    }
  }
}

BOOST_AUTO_TEST_CASE(percentiles_interpolate_between_order_statistics) {
  const std::vector<double> v = {4, 1, 3, 2, 5};
  BOOST_TEST(quantile(v, 0.5) == 3.0);
  BOOST_TEST(quantile(v, 0.95) == 4.8, tt::tolerance(1e-12));
  BOOST_TEST(quantile(v, 0) == 1.0);
  const IterationSpread s = summarize_spread({1.0, 1.02, 1.2, 1.3}, 1.0, 10);
  BOOST_TEST(s.p_slower == 0.5);  // 1.2 and 1.3 are more than 10% over 1.0
  BOOST_TEST(s.mean_s == 1.13, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(zero_variability_gives_todays_figure_exactly) {
  const nlohmann::json today = report("simulate " + tp2("today", "") + " --iterations 3");
  const nlohmann::json zero = report(
      "simulate " + tp2("zero", "variability: {kernels: {cv: 0}, ranks: {cv: 0, distribution: uniform}}\n") +
      " --iterations 3");
  BOOST_TEST(zero["metrics"] == today["metrics"]);
  BOOST_TEST(zero["simulation"]["iteration_times_s"] == today["simulation"]["iteration_times_s"]);
  BOOST_TEST(zero["simulation"]["folded_tp_lanes"] == 2);  // nothing differs: the lanes still fold
  // Without noise the iterations differ only by what the last one does not share with a next one
  // (ranks that start it early, beside another's tail): the spread's p99 is the longest of them.
  const auto& spread = zero["simulation"]["spread"];
  double longest = 0;
  for (const auto& t : today["simulation"]["iteration_times_s"]) longest = std::max(longest, t.get<double>());
  BOOST_TEST(spread["p99_s"].get<double>() == longest, tt::tolerance(1e-9));
  BOOST_TEST(longest == today["metrics"]["iteration_time_s"].get<double>(), tt::tolerance(1e-3));
  BOOST_TEST(spread["p_slower"].get<double>() == 0.0);
}

BOOST_AUTO_TEST_CASE(variability_never_folds_tp_lanes_so_every_lane_keeps_its_own_draws) {
  const std::string s = tp2("noisy", "variability: {kernels: {cv: 0.1}, ranks: {cv: 0.05}}\n");
  const nlohmann::json unfolded = report("simulate " + s + " --iterations 4 --seed 9");
  const nlohmann::json all = report("simulate " + s + " --iterations 4 --seed 9 --all-ranks");
  BOOST_TEST(unfolded["simulation"]["folded_tp_lanes"] == 1);
  BOOST_TEST(unfolded["simulation"]["unfolded_for_variability"] == true);
  BOOST_TEST(unfolded["simulation"]["simulated_ranks"] == 16);
  BOOST_TEST(unfolded["simulation"]["iteration_times_s"] == all["simulation"]["iteration_times_s"]);
}

BOOST_AUTO_TEST_CASE(kernel_noise_spreads_the_steps_above_the_noise_free_one_reproducibly_per_seed) {
  const std::string s = tp2("kernels", "variability: {kernels: {cv: 0.3, by_kind: {optimizer: 0}}}\n");
  const nlohmann::json a = report("simulate " + s + " --iterations 20 --seed 5 --slower-than 2");
  const nlohmann::json again = report("simulate " + s + " --iterations 20 --seed 5 --slower-than 2");
  const nlohmann::json other = report("simulate " + s + " --iterations 20 --seed 6 --slower-than 2");
  BOOST_TEST(a.dump() == again.dump());
  BOOST_TEST(a["simulation"]["iteration_times_s"] != other["simulation"]["iteration_times_s"]);
  const auto& sp = a["simulation"]["spread"];
  const double free = sp["noise_free_s"].get<double>();
  BOOST_TEST(sp["iterations"] == 20);
  BOOST_TEST(sp["slower_than_pct"].get<double>() == 2.0);
  // Every step waits for the slowest of 16 ranks' noisy kernels: above the noise-free step.
  BOOST_TEST(sp["p50_s"].get<double>() > free);
  BOOST_TEST(sp["p5_s"].get<double>() <= sp["p50_s"].get<double>());
  BOOST_TEST(sp["p50_s"].get<double>() < sp["p95_s"].get<double>());
  BOOST_TEST(sp["p95_s"].get<double>() <= sp["p99_s"].get<double>());
  BOOST_TEST(sp["p99_s"].get<double>() <= sp["max_s"].get<double>());
  BOOST_TEST(sp["p_slower"].get<double>() > 0.0);
}

BOOST_AUTO_TEST_CASE(the_mean_step_grows_with_the_ranks_as_the_expected_maximum_of_their_draws) {
  // Persistent per-GPU slowness, compute-bound steps: a step is as slow as its slowest GPU. The
  // simulator's mean over seeds against the expected largest of n draws, computed apart by drawing.
  const NoiseSpec spec{NoiseDistribution::Lognormal, 0.1};
  const int seeds = 10;
  std::vector<double> simulated_mean;
  for (const int n : {2, 8}) {
    const std::string s = data_parallel(n, "variability: {ranks: {cv: 0.1}}\n");
    double sum = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      // (as many NICs as GPUs: a node with NICs that no GPU uses is not simulated today)
      const nlohmann::json r = report(
          "simulate " + s + " --set cluster.pools.dgx.gpus_per_node=" + std::to_string(n) +
          " --set cluster.pools.dgx.nic.count=" + std::to_string(n) + " --seed " + std::to_string(seed));
      const auto& sp = r["simulation"]["spread"];
      const double ratio = sp["mean_s"].get<double>() / sp["noise_free_s"].get<double>();
      // Each seed's step is its slowest GPU's factor times the noise-free step (communication is small).
      BOOST_TEST(ratio == r["simulation"]["slowest_gpu_factor"].get<double>(), tt::tolerance(0.01));
      sum += ratio;
    }
    const Moments expected = expected_maximum(spec, n, 100000);
    const double mean = sum / seeds;
    BOOST_TEST_MESSAGE("ranks " << n << ": simulated mean step / noise-free " << mean << ", expected maximum "
                                << expected.mean << " (sd " << expected.sd << ")");
    BOOST_TEST_CONTEXT("ranks " << n << ": simulated " << mean << ", expected " << expected.mean << " +- "
                                << expected.sd / std::sqrt(seeds)) {
      // Within three standard errors of a mean of `seeds` draws, plus 1% for the communication.
      BOOST_TEST(std::abs(mean - expected.mean) <= 3 * expected.sd / std::sqrt(seeds) + 0.01 * expected.mean);
    }
    simulated_mean.push_back(mean);
  }
  BOOST_TEST(simulated_mean[1] > simulated_mean[0]);
}

BOOST_AUTO_TEST_CASE(a_mistyped_variability_is_an_input_error_with_the_nearest_choice) {
  const std::string s =
      tp2("bad",
          "variability:\n  kernels: {distribution: lognormel, by_kind: {forwrd: 0.1}}\n"
          "  ranks: {cv: 0.9, distribution: uniform}\n  steps: {cv: 0.6, distribution: uniform}\n");
  const Result r = paratwin_test::paratwin("validate " + s);
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("bad.yaml:7:27") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("did you mean 'lognormal'") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("did you mean 'forward'") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("variability.ranks.cv") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("variability.steps.cv = 0.6 is too wide") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(png_draws_the_spread_and_needs_one_to_draw) {
  if (!fs::exists(paratwin_test::bin_dir() + "/paratwin-plot")) return;  // built only with Qt 6 Gui
  const fs::path png = test_dir("paratwin_spread_") / "spread.png";
  const std::string s = tp2("picture", "variability: {kernels: {cv: 0.1}}\n");
  const Result drawn = paratwin_test::paratwin("simulate " + s + " --iterations 8 --png " + png.string());
  BOOST_TEST(drawn.status == 0, drawn.err);
  BOOST_TEST(slurp(png).substr(1, 3) == "PNG");
  BOOST_TEST(!fs::exists(png.string() + ".report.json"));  // the plotter's input is gone
  const Result refused = paratwin_test::paratwin("simulate " + tp2("plain", "") + " --png " + png.string());
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.err.find("--iterations") != std::string::npos, refused.err);
}

BOOST_AUTO_TEST_CASE(sweep_ranks_simulated_plans_by_their_p95_step) {
  const std::string s =
      scenario_file("ranked",
                    "name: ranked\nmodel: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 2}\n"
                    "training: {global_batch: 16, seq_len: 2048, tokens: 1B}\n"
                    "plan: {tp: 2, pp: 1, dp: 8, micro_batch: 2}\n"
                    "variability: {kernels: {cv: 0.1}, ranks: {cv: 0.05}}\n"
                    "sweep: {simulate: true, list: [{plan.tp: 2, plan.dp: 8}, {plan.tp: 4, plan.dp: 4}]}\n");
  const fs::path json = test_dir("paratwin_spread_") / "ranked.json";
  const Result r =
      paratwin_test::paratwin("sweep " + s + " --iterations 6 --rank-by p95 --json " + json.string());
  BOOST_REQUIRE_MESSAGE(r.status == 0, r.err);
  const nlohmann::json results = read_json(json);
  std::vector<std::pair<double, int>> p95;
  for (const auto& p : results["points"]) {
    BOOST_TEST(p["p95_iteration_time_s"].get<double>() >= p["metrics"]["iteration_time_s"].get<double>());
    p95.push_back({p["p95_iteration_time_s"].get<double>(), p["index"].get<int>()});
  }
  BOOST_REQUIRE(p95.size() == 2u);
  std::sort(p95.begin(), p95.end());
  const std::string expected = "ranked by p95 (best first): #" + std::to_string(p95[0].second) + " ";
  BOOST_TEST(r.out.find(expected) != std::string::npos, r.out);
  // Ranking by P95 needs simulated points.
  const Result refused = paratwin_test::paratwin("sweep " + s + " --set sweep.simulate=false --rank-by p95");
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.err.find("sweep.simulate") != std::string::npos, refused.err);
}
