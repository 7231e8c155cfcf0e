// Sweeps without processes: grid and list expansion, command-line axes, one point's figures, the
// Pareto front, the goal's answer, results round trips and plot lines.
#define BOOST_TEST_MODULE sweep
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "catalog_scenario.hpp"
#include "plan/sweep/lines.hpp"
#include "plan/sweep/results.hpp"

using namespace paratwin;
using paratwin_test::catalog;

namespace {

ScenarioSpec load(const std::string& yaml) {
  return load_scenario(parse_yaml(yaml, "s.yaml"), {}, catalog());
}

std::string error_of(const std::string& yaml) {
  try {
    load(yaml);
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

// GPT 1.7B with tp and the micro-batch fixed: dp follows from the cluster, no search.
const std::string kSmall = R"(
name: small
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 2}
training: {global_batch: 512, seq_len: 2048, tokens: 30B}
plan: {tp: 2, pp: 1, micro_batch: 4, recompute: selective, sequence_parallel: true, zero: 1}
sweep:
  grid:
    cluster.nodes: [2, 4, 8]
    cluster: [dgx-a100-80g, dgx-h100]
)";

PointResult priced(int index, double days, double dollars) {
  PointResult p;
  p.index = index;
  p.time_to_train_s = days * 86400;
  p.cost_usd = dollars;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(grid_expands_as_nested_loops_and_applies_whole_fields_first) {
  const ScenarioSpec s = load(kSmall);
  const std::vector<SweepPoint> points = expand_sweep(s.sweep);
  BOOST_REQUIRE(points.size() == 6u);
  BOOST_TEST(describe(points[0]) == "cluster.nodes=2 cluster=dgx-a100-80g");
  BOOST_TEST(describe(points[1]) == "cluster.nodes=2 cluster=dgx-h100");
  BOOST_TEST(describe(points[5]) == "cluster.nodes=8 cluster=dgx-h100");
  for (int i = 0; i < 6; ++i) BOOST_TEST(points[i].index == i);
  // `cluster.nodes` is written first, but the cluster swap must not undo it.
  const std::vector<Override> o = sweep_overrides(points[5].settings);
  BOOST_TEST(o[0].text == "cluster=dgx-h100");
  BOOST_TEST(o[1].text == "cluster.nodes=8");
  DocNode doc = s.document;
  for (const auto& x : o) apply_override(doc, x);
  std::erase_if(doc.entries, [](const DocEntry& e) { return e.key == "sweep"; });
  const ScenarioSpec point = load_scenario(doc, {}, catalog());
  BOOST_TEST(point.cluster.name == "dgx-h100");
  BOOST_TEST(point.cluster.gpus() == 64);
}

BOOST_AUTO_TEST_CASE(list_entries_are_crossed_with_the_grid) {
  const ScenarioSpec s = load(R"(
name: listed
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 2}
training: {global_batch: 512, tokens: 30B}
plan: {tp: 2, pp: 1, micro_batch: 4}
sweep:
  list:
    - {cluster: dgx-h100, plan.tp: 4}
    - {cluster: dgx-a100-80g}
  grid:
    cluster.gpus: [16, 32]
)");
  const std::vector<SweepPoint> points = expand_sweep(s.sweep);
  BOOST_REQUIRE(points.size() == 4u);
  BOOST_TEST(describe(points[0]) == "cluster=dgx-h100 plan.tp=4 cluster.gpus=16");
  BOOST_TEST(describe(points[3]) == "cluster=dgx-a100-80g cluster.gpus=32");
}

BOOST_AUTO_TEST_CASE(sweep_values_are_checked_at_their_own_position) {
  BOOST_TEST(
      error_of(R"(
name: x
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 2}
training: {global_batch: 512, tokens: 30B}
sweep:
  list:
    - {cluster.nodez: 4}
)")
          .find("s.yaml:8:8: error: sweep.list[0]: unknown key 'nodez' in cluster — did you mean 'nodes'?") !=
      std::string::npos);
  BOOST_TEST(error_of(R"(
name: x
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 2}
training: {global_batch: 512, tokens: 30B}
sweep: {simulate: true}
)")
                 .find("sweep needs a grid") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cluster_gpus_resizes_in_whole_nodes_and_the_later_size_wins) {
  const std::string base = R"(
name: x
model: gpt3-1.7b
training: {global_batch: 512}
)";
  BOOST_TEST(load(base + "cluster: {from: dgx-h100, nodes: 4, gpus: 128}").cluster.gpus() == 128);
  BOOST_TEST(load(base + "cluster: {from: dgx-h100, gpus: 128, nodes: 4}").cluster.gpus() == 32);
  BOOST_TEST(error_of(base + "cluster: {from: dgx-h100, gpus: 100}")
                 .find("cluster.gpus=100 is not a whole number of 8-GPU nodes (pool 'dgx'); the nearest "
                       "cluster.gpus that works is 96") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(grid_arguments_parse_yaml_values_and_point_into_the_argument) {
  const SweepAxis axis = parse_grid_argument("cluster={from: dgx-h100, nodes: 4},dgx-a100-80g");
  BOOST_TEST(axis.path == "cluster");
  BOOST_REQUIRE(axis.values.size() == 2u);
  BOOST_TEST(to_flow_yaml(axis.values[0]) == "{from: dgx-h100, nodes: 4}");
  BOOST_TEST(axis.values[1].location.str() ==
             "<--grid cluster={from: dgx-h100, nodes: 4},dgx-a100-80g>:1:36");
  for (const char* bad : {"cluster.gpus", "=1,2", "cluster.gpus=", "cluster.gpus=[1,"}) {
    BOOST_TEST_CONTEXT(bad) {
      BOOST_CHECK_THROW(parse_grid_argument(bad), InputError);
    }
  }
  try {
    parse_grid_argument("cluster.gpus=");
  } catch (const InputError& e) {
    BOOST_TEST(e.diagnostics().front().str().rfind(
                   "<--grid cluster.gpus=>:1:14: error: expected a comma-separated", 0) == 0);
  }
}

BOOST_AUTO_TEST_CASE(grid_arguments_replace_an_axis_of_the_same_path_and_are_checked) {
  ScenarioSpec s = load(kSmall);
  add_grid_axes(s, {parse_grid_argument("cluster.nodes=1,16"), parse_grid_argument("training.seq_len=1024")},
                catalog());
  BOOST_REQUIRE(s.sweep.grid.size() == 3u);
  BOOST_TEST(s.sweep.grid[0].path == "cluster.nodes");
  BOOST_TEST(s.sweep.grid[0].values.size() == 2u);
  BOOST_TEST(s.sweep.grid[2].path == "training.seq_len");
  BOOST_TEST(expand_sweep(s.sweep).size() == 4u);
  try {
    add_grid_axes(s, {parse_grid_argument("training.precision=bf16,bf61")}, catalog());
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(
        e.diagnostics().front().str() ==
        "<--grid training.precision=bf16,bf61>:1:25: error: sweep.grid.training.precision: invalid value "
        "'bf61' for training.precision; expected one of fp32, tf32, fp16, bf16, fp8 — did you mean 'bf16'?");
  }
}

BOOST_AUTO_TEST_CASE(a_point_costs_its_gpu_hours_at_the_cluster_price_and_power) {
  const ScenarioSpec s = load(kSmall);
  const std::vector<SweepPoint> points = expand_sweep(s.sweep);
  const PointResult p = evaluate_point(s, points[3], {}, catalog());  // 4 DGX H100 nodes
  BOOST_REQUIRE_MESSAGE(p.ok(), p.message);
  BOOST_TEST(p.cluster == "dgx-h100");
  BOOST_TEST(p.devices == "h100-sxm-80g");
  BOOST_TEST(p.gpus == 32);
  BOOST_TEST(p.plan.at("dp").get<int>() == 16);
  BOOST_TEST(p.tokens == 30e9);
  BOOST_TEST(p.time_to_train_s == 30e9 / p.metrics.tokens_per_s, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(p.gpu_hours == 32 * p.time_to_train_s / 3600, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(*p.cost_usd == p.gpu_hours * 2.50, boost::test_tools::tolerance(1e-12));  // dgx-h100's price
  // 700 W per GPU plus 4600 W per 8-GPU node, times PUE 1.2.
  BOOST_TEST(p.energy_mwh == 32 * (700 + 4600.0 / 8) * 1.2 * p.time_to_train_s / 3.6e9,
             boost::test_tools::tolerance(1e-12));
  // Twice the nodes: more tokens per second, so a shorter time to train.
  const PointResult q = evaluate_point(s, points[5], {}, catalog());
  BOOST_REQUIRE(q.ok());
  BOOST_TEST(q.time_to_train_s < p.time_to_train_s);
}

// With failure rates an analytic point expects the closed form's goodput, which stretches its time.
BOOST_AUTO_TEST_CASE(an_analytic_point_under_failures_stretches_its_time_by_the_expected_goodput) {
  const ScenarioSpec s = load(kSmall + "failures: {host: {mtbf: 2d}}\n");
  const ScenarioSpec q = load(kSmall);
  const std::vector<SweepPoint> points = expand_sweep(s.sweep);
  const PointResult quiet = evaluate_point(q, points[3], {}, catalog());
  const PointResult p = evaluate_point(s, points[3], {}, catalog());
  BOOST_REQUIRE_MESSAGE(p.ok(), p.message);
  BOOST_REQUIRE(p.goodput.has_value());
  BOOST_TEST(*p.goodput > 0);
  BOOST_TEST(*p.goodput < 1);
  BOOST_TEST(!quiet.goodput.has_value());
  BOOST_TEST(p.time_to_train_s == 30e9 / (p.metrics.tokens_per_s * *p.goodput),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(p.time_to_train_s > quiet.time_to_train_s);
}

BOOST_AUTO_TEST_CASE(a_point_that_cannot_run_says_why) {
  ScenarioSpec s = load(kSmall);
  add_grid_axes(s, {parse_grid_argument("plan.tp=3")}, catalog());
  const PointResult p = evaluate_point(s, expand_sweep(s.sweep).front(), {}, catalog());
  BOOST_TEST((p.status == PointStatus::Invalid));
  BOOST_TEST(p.message.find("plan.tp=3 does not fit the 8 GPUs per node") != std::string::npos, p.message);
  BOOST_TEST(p.message.find("the nearest plan.tp that works is 2") != std::string::npos, p.message);
}

BOOST_AUTO_TEST_CASE(the_pareto_front_keeps_undominated_points_fastest_first) {
  std::vector<PointResult> points = {priced(0, 10, 500), priced(1, 5, 900),  priced(2, 12, 400),
                                     priced(3, 6, 950),  priced(4, 20, 400), priced(5, 5, 900),
                                     priced(6, 30, 100)};
  points.push_back(priced(7, 1, 1));
  points[7].status = PointStatus::NoPlan;  // never on the front
  const std::vector<int> front = pareto_front(points);
  BOOST_TEST(front == (std::vector<int>{1, 0, 2, 6}), boost::test_tools::per_element());
  for (size_t k = 1; k < front.size(); ++k) {
    BOOST_TEST(points[front[k]].time_to_train_s > points[front[k - 1]].time_to_train_s);
    BOOST_TEST(*points[front[k]].cost_usd < *points[front[k - 1]].cost_usd);
  }
}

BOOST_AUTO_TEST_CASE(the_goal_picks_the_cheapest_in_time_or_names_the_closest) {
  const std::vector<PointResult> points = {priced(0, 10, 500), priced(1, 5, 900), priced(2, 12, 400)};
  GoalSpec deadline{Seconds(11 * 86400.0), std::nullopt};
  GoalAnswer a = answer_goal(deadline, points);
  BOOST_TEST(a.met);
  BOOST_TEST(*a.chosen == 0);
  BOOST_TEST(a.message == "cheapest point within the deadline of 11 d: #0 (0 GPUs): 10 d, $500.00");

  GoalSpec tight{Seconds(4 * 86400.0), std::nullopt};
  a = answer_goal(tight, points);
  BOOST_TEST(!a.met);
  BOOST_TEST(!a.chosen);
  BOOST_TEST(*a.closest == 1);
  BOOST_TEST(
      a.message ==
      "no point meets the deadline of 4 d; the closest is #1 (0 GPUs): 5 d, $900.00 (1 d over the deadline)");

  GoalSpec budget{std::nullopt, Dollars(600)};
  a = answer_goal(budget, points);
  BOOST_TEST(*a.chosen == 0);  // the fastest within the budget
  GoalSpec both{Seconds(11 * 86400.0), Dollars(450)};
  a = answer_goal(both, points);
  BOOST_TEST(!a.met);
  BOOST_TEST(*a.closest == 2);  // 12/11 of the deadline beats #0's 500/450 of the budget
}

BOOST_AUTO_TEST_CASE(results_round_trip_through_json_unchanged) {
  const ScenarioSpec s = load(kSmall);
  const std::vector<SweepPoint> points = expand_sweep(s.sweep);
  SweepResults r = start_results(s);
  BOOST_TEST(r.fields == (std::vector<std::string>{"cluster.nodes", "cluster"}),
             boost::test_tools::per_element());
  for (int i : {4, 1, 0}) add_point(r, evaluate_point(s, points[i], {}, catalog()));
  add_point(r, failed_point(points[2], "the worker process was killed by signal 9"));
  BOOST_TEST(r.points[1].index == 1);
  BOOST_TEST(!r.complete());
  const std::string once = to_json(r).dump(2);
  const SweepResults back = results_from_json(nlohmann::json::parse(once));
  BOOST_TEST(to_json(back).dump(2) == once);
  BOOST_TEST(to_csv(back) == to_csv(r));
  // Another sweep has another fingerprint.
  ScenarioSpec other = load(kSmall);
  add_grid_axes(other, {parse_grid_argument("training.seq_len=1024,2048")}, catalog());
  BOOST_TEST(start_results(other).fingerprint != r.fingerprint);
}

BOOST_AUTO_TEST_CASE(plot_lines_follow_device_types_and_the_other_fields) {
  SweepResults r;
  r.fields = {"cluster", "cluster.nodes", "training.tokens"};
  auto point = [&](int index, const std::string& cluster, const std::string& devices, int gpus,
                   const std::string& tokens) {
    PointResult p = priced(index, 10, 10);
    p.cluster = cluster;
    p.devices = devices;
    p.gpus = gpus;
    p.settings = {
        {"cluster", cluster}, {"cluster.nodes", std::to_string(gpus / 8)}, {"training.tokens", tokens}};
    r.points.push_back(p);
  };
  point(0, "dgx-h100", "h100-sxm", 64, "1T");
  point(1, "dgx-h100", "h100-sxm", 32, "1T");
  point(2, "dgx-a100-80g", "a100-sxm-80g", 32, "1T");
  point(3, "dgx-h100", "h100-sxm", 32, "5T");
  const std::vector<SweepLine> lines = sweep_lines(r);
  BOOST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0].label == "h100-sxm, training.tokens=1T");
  BOOST_TEST(lines[0].points == (std::vector<int>{1, 0}), boost::test_tools::per_element());  // by GPU count
  BOOST_TEST(lines[1].device == 1);
  BOOST_TEST(lines[2].device == 0);
  BOOST_TEST(lines[2].variant == 1);
  point(4, "h100-roce", "h100-sxm", 64, "1T");  // the same device type in another cluster
  BOOST_TEST(sweep_lines(r).back().label == "h100-sxm (h100-roce), training.tokens=1T");
}

BOOST_AUTO_TEST_CASE(flow_yaml_parses_back_to_the_same_values) {
  for (const char* text : {"8", "dgx-h100", "\"8\"", "[1, 2, 3]", "{from: dgx-h100, nodes: 4}", "\"a, b\"",
                           "{kind: topk, ratio: 0.01}", "null", "-5", "\"*x\""}) {
    const DocNode n = parse_yaml(std::string("v: ") + text, "t").entries.front().value.front();
    BOOST_TEST(to_flow_yaml(n) == text);
  }
}
