// Expert routing that is not balanced: `model.moe.routing` parsed with precise errors, the one rule
// from routing to tokens per EP rank, and what lowering, the evaluator and the report make of it.
#define BOOST_TEST_MODULE routing
#include <boost/test/unit_test.hpp>

#include "catalog_scenario.hpp"
#include "fast_cluster.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/calibrate/measured_routing.hpp"
#include "plan/cost/expert_load.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/report.hpp"
#include "plan/report/routing_cost.hpp"
#include "plan/spec/scenario.hpp"

using namespace paratwin;

namespace {

ModelSpec parse(const std::string& yaml) {
  Diagnostics diag;
  ModelSpec m = parse_model(parse_yaml(yaml, "test.yaml"), "model", diag);
  diag.throw_if_errors();
  return m;
}

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kMoe = "{layers: 4, hidden: 128, heads: 4, ffn_hidden: 256, vocab: 256, seq_len: 128, ";

// Compute-bound (memory nearly infinitely fast) and with communication nearly free: a task's time is its
// GEMM FLOPs at 50 TFLOP/s.
const std::string kFastCluster = paratwin_test::fast_cluster(1, "1000000TBps");

struct Run {
  ScenarioSpec s;
  Program program;
  Evaluation eval;
  Report report;
};

// tiny-moe's shapes (4 experts, top 2) on 2 ranks, data and expert parallel, one micro-batch of 4.
Run run(const std::string& moe) {
  const std::string yaml = "model: " + kMoe + "moe: " + moe + "}\n" + kFastCluster +
                           "training: {global_batch: 8, seq_len: 64}\n"
                           "plan: {dp: 2, ep: 2, tp: 1, pp: 1, micro_batch: 4, recompute: none, zero: 0}\n";
  Run r{load_scenario(parse_yaml(yaml, "test.yaml"), {}, paratwin_test::catalog()), {}, {}, {}};
  const Plan plan = complete_plan(r.s);
  r.program = lower(plan, r.s.model, r.s.cluster, r.s.training);
  r.eval = evaluate(r.program, r.s.cluster, r.s.training);
  r.report = make_report(r.s.name, r.program, r.eval);
  add_routing_cost(r.report, r.s);
  return r;
}

const Task& first(const Program& p, TaskKind kind,
                  cost::CollectiveKind collective = cost::CollectiveKind::AllReduce) {
  for (const Task& t : p.roles.front().tasks)
    if (t.kind == kind && (kind != TaskKind::Collective || t.collective == collective)) return t;
  BOOST_FAIL("no such task");
  return p.roles.front().tasks.front();
}

}  // namespace

BOOST_AUTO_TEST_CASE(routing_kinds_parse_and_write_back) {
  for (const char* routing :
       {"balanced", "{kind: zipf, s: 1.2, seed: 7}", "{kind: shares, shares: [4, 2, 3, 1]}",
        "{kind: measured, tokens: [[10, 20, 30, 40]]}",
        "{kind: measured, tokens: [[1, 2, 3, 4], [4, 3, 2, 1], [1, 1, 1, 1], [0, 1, 0, 1]]}"}) {
    BOOST_TEST_CONTEXT(routing) {
      const ModelSpec m = parse(kMoe + "moe: {experts: 4, top_k: 2, routing: " + routing + "}}");
      const ModelSpec again = parse(to_yaml(m));
      BOOST_TEST((again.moe->routing == m.moe->routing));
    }
  }
  BOOST_TEST(parse(kMoe + "moe: {experts: 4, top_k: 2}}").moe->routing.balanced());
  BOOST_TEST(!parse(kMoe + "moe: {experts: 4, top_k: 2}}").moe->capacity_factor.has_value());
}

BOOST_AUTO_TEST_CASE(bad_routing_says_where_what_and_the_nearest_choice) {
  const std::string typo = error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: zipff}}");
  BOOST_TEST(typo.find("test.yaml:1:") != std::string::npos);
  BOOST_TEST(typo.find("model.moe.routing") != std::string::npos);
  BOOST_TEST(typo.find("did you mean 'zipf'?") != std::string::npos);
  const std::string kind =
      error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: share, shares: [1]}}}");
  BOOST_TEST(kind.find("did you mean 'shares'?") != std::string::npos);
  const std::string bare = error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: zipf}}");
  BOOST_TEST(bare.find("needs its parameters") != std::string::npos);
  const std::string count =
      error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: shares, shares: [1, 2]}}}");
  BOOST_TEST(count.find("expected 4 entries (model.moe.experts), got 2") != std::string::npos);
  const std::string rows = error_of(
      kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: measured, tokens: [[1,1,1,1], [1,1,1,1]]}}}");
  BOOST_TEST(rows.find("expected 1 row (for every MoE layer) or 4 (one per MoE layer), got 2") !=
             std::string::npos);
  const std::string zeros =
      error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: shares, shares: [0, 0, 0, 0]}}}");
  BOOST_TEST(zeros.find("at least one positive entry") != std::string::npos);
  const std::string key =
      error_of(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: zipf, s: 1, sed: 3}}}");
  BOOST_TEST(key.find("did you mean 'seed'?") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(shares_and_capacity_give_the_hand_computed_rank_loads) {
  ModelSpec m = parse(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: shares, shares: [4, 2, 3, 1]}}}");
  // EP rank 0 holds experts 0 and 1: 0.4 + 0.2 of the assignments, 2 x 0.6 = 1.2 of its balanced count.
  cost::ExpertLoad load = cost::expert_load(*m.moe, 2, 0, 0);
  BOOST_TEST(load.rank_load[0] == 1.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(load.rank_load[1] == 0.8, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(load.dropped == 0.0);
  // Capacity 1.2 x 1/4 = 0.3 per expert: expert 0 drops 0.1, rank 0 runs 2 x (0.3 + 0.2) = 1.0.
  m.moe->capacity_factor = 1.2;
  load = cost::expert_load(*m.moe, 2, 0, 0);
  BOOST_TEST(load.dropped == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(load.hottest() == 1.0, boost::test_tools::tolerance(1e-12));
  // One EP rank holds every expert: it runs what was not dropped.
  BOOST_TEST(cost::expert_load(*m.moe, 1, 0, 0).hottest() == 0.9, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(zipf_is_redrawn_per_step_and_layer_from_its_seed) {
  const ModelSpec m = parse(kMoe + "moe: {experts: 4, top_k: 2, routing: {kind: zipf, s: 1.5, seed: 3}}}");
  const auto a = cost::layer_routing(m, 2), b = cost::layer_routing(m, 2);
  BOOST_REQUIRE(a.size() == 4u);
  for (size_t l = 0; l < a.size(); ++l) BOOST_TEST(a[l].pace == b[l].pace);  // a seed names one draw
  bool differ = false;
  for (int step = 1; step < 8; ++step)
    differ = differ || cost::expert_load(*m.moe, 2, 0, step).expert_share !=
                           cost::expert_load(*m.moe, 2, 0, 0).expert_share;
  BOOST_TEST(differ);
  // Shares 1, 2^-1.5, 3^-1.5, 4^-1.5 over their sum: the hottest of 2 ranks holds at least the top
  // expert's, and the mean over steps lies between that and the two most popular together.
  const double h = 1 + std::pow(2, -1.5) + std::pow(3, -1.5) + std::pow(4, -1.5);
  for (const auto& l : a) {
    BOOST_TEST(l.pace >= 2 * (1 + std::pow(4, -1.5)) / h - 1e-12);
    BOOST_TEST(l.pace <= 2 * (1 + std::pow(2, -1.5)) / h + 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(balanced_routing_gives_todays_results_exactly) {
  const Run today = run("{experts: 4, top_k: 2}");
  for (const char* same : {"{experts: 4, top_k: 2, routing: balanced}",
                           "{experts: 4, top_k: 2, routing: {kind: shares, shares: [1, 1, 1, 1]}}",
                           "{experts: 4, top_k: 2, capacity_factor: 1.0, routing: balanced}"}) {
    BOOST_TEST_CONTEXT(same) {
      const Run r = run(same);
      BOOST_TEST(to_text(r.program) == to_text(today.program));
      BOOST_TEST(r.eval.iteration_time_s == today.eval.iteration_time_s);
      BOOST_TEST(!r.report.routing.has_value());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_skew_slows_the_moe_layers_by_the_hottest_ranks_share) {
  const Run balanced = run("{experts: 4, top_k: 2}");
  const Run skewed = run("{experts: 4, top_k: 2, routing: {kind: shares, shares: [4, 2, 3, 1]}}");
  // The hottest EP rank runs 1.2 x the balanced rows in every MoE layer. Hand calculation of the
  // extra expert GEMM FLOPs of one forward: 4 MoE layers x 0.2 x (up + down projection)
  //   0.2 x 4 x 2 x (2 x rows x h x f), rows = top_k x b x s = 2 x 4 x 64 = 512, h = 128, f = 256
  const double extra_forward = 0.2 * 4 * 2 * (2.0 * 512 * 128 * 256);
  const Task& f0 = first(balanced.program, TaskKind::Forward);
  const Task& f1 = first(skewed.program, TaskKind::Forward);
  BOOST_TEST(f1.work.gemm_flops.value() - f0.work.gemm_flops.value() == extra_forward,
             boost::test_tools::tolerance(1e-9));
  const Task& b0 = first(balanced.program, TaskKind::Backward);
  const Task& b1 = first(skewed.program, TaskKind::Backward);
  BOOST_TEST(b1.work.gemm_flops.value() - b0.work.gemm_flops.value() == 2 * extra_forward,
             boost::test_tools::tolerance(1e-9));
  // The all-to-alls move the hottest rank's 1.2 x.
  const Task& a0 = first(balanced.program, TaskKind::Collective, cost::CollectiveKind::AllToAll);
  const Task& a1 = first(skewed.program, TaskKind::Collective, cost::CollectiveKind::AllToAll);
  BOOST_TEST(a1.bytes.value() / a0.bytes.value() == 1.2, boost::test_tools::tolerance(1e-12));
  // On a compute-bound device (100 TFLOP/s at efficiency 0.5, memory and network nearly free) the
  // step takes forward + backward's extra FLOPs at 50 TFLOP/s longer.
  const double extra_s = 3 * extra_forward / 50e12;
  BOOST_TEST(skewed.eval.iteration_time_s - balanced.eval.iteration_time_s == extra_s,
             boost::test_tools::tolerance(1e-3));
  // The report: max over mean tokens per EP rank, and the same cost in time.
  BOOST_REQUIRE(skewed.report.routing.has_value());
  const RoutingReport& rr = *skewed.report.routing;
  BOOST_TEST(rr.imbalance == 1.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rr.rank_load.size() == 2u);
  BOOST_TEST(rr.balanced_iteration_time_s == balanced.eval.iteration_time_s,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(rr.cost_s == extra_s, boost::test_tools::tolerance(1e-3));
  const nlohmann::json j = to_json(skewed.report);
  BOOST_TEST(j.at("routing").at("imbalance").get<double>() == 1.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(to_text(skewed.report).find("imbalance 1.20x") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_profiles_tokens_per_expert_become_the_measured_routing) {
  const ModelSpec m = parse(kMoe + "moe: {experts: 4, top_k: 2}}");
  Profile p;
  p.routed_experts = 4;
  for (int l = 0; l < 4; ++l) p.routed.push_back({l, {10.0 + l, 20, 30, 40}});
  MoeRouting r = measured_routing(p, m);
  BOOST_TEST((r.kind == RoutingKind::Measured));
  BOOST_REQUIRE(r.tokens.size() == 4u);
  BOOST_TEST(r.tokens[3] == (std::vector<double>{13, 20, 30, 40}), boost::test_tools::per_element());
  // A profile of pipeline rank 0 has its own layers only: their sum stands for every layer.
  p.routed.resize(2);
  r = measured_routing(p, m);
  BOOST_REQUIRE(r.tokens.size() == 1u);
  BOOST_TEST(r.tokens[0] == (std::vector<double>{21, 40, 60, 80}), boost::test_tools::per_element());
  // What the routing gives: EP rank 0 (experts 0, 1) runs 61 of 201 assignments, rank 1 140.
  ModelSpec measured = m;
  measured.moe->routing = r;
  BOOST_TEST(cost::expert_load(*measured.moe, 2, 2, 0).hottest() == 2 * 140.0 / 201,
             boost::test_tools::tolerance(1e-12));
  p.routed_experts = 8;
  BOOST_CHECK_THROW(measured_routing(p, m), InputError);
  p.routed.clear();
  BOOST_CHECK_THROW(measured_routing(p, m), InputError);
}
