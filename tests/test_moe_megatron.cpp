// Megatron-Core's MoE plans: parallel folding (plan.expert_tp 1, its expert grid: who meets whom, what
// the Program moves and computes against the same plan with the experts sharded over the TP group) and
// combined 1F1B (plan.overlap.ep, --overlap-moe-expert-parallel-comm: the order it runs the passes in,
// which all-to-alls leave for the Ep stream, the time it saves), and the plans each refuses.
#define BOOST_TEST_MODULE moe_megatron
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "catalog_scenario.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/cost/memory.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/ir/program.hpp"
#include "plan/ir/schedule.hpp"
#include "plan/report/emit.hpp"
#include "plan/search/optimizer.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/topology/rank_groups.hpp"

using namespace paratwin;
namespace tt = boost::test_tools;

namespace {

using cost::CollectiveKind;
using paratwin_test::plan_problem;
using paratwin_test::scenario;

// Every layer an MoE layer: 16 experts of which 2 a token, on two 8-GPU nodes at tp 2, dp 8, ep 8.
const std::string kFolding =
    "model: {name: moe, layers: 4, hidden: 256, heads: 8, ffn_hidden: 512, vocab: 2048, seq_len: 512,\n"
    "        tied_embeddings: false, moe: {experts: 16, top_k: 2}}\n"
    "cluster: {from: dgx-h100, nodes: 2}\ntraining: {global_batch: 32, seq_len: 512}\n"
    "plan: {tp: 2, pp: 1, dp: 8, ep: 8, micro_batch: 1, sequence_parallel: true}\n";

// An MoE whose all-to-alls cross nodes: ep 16 over two 8-GPU nodes, every layer an MoE layer.
const std::string kCrossNode =
    "model: {name: moe, layers: 8, hidden: 1024, heads: 8, ffn_hidden: 1024, vocab: 2048, seq_len: 1024,\n"
    "        tied_embeddings: false, moe: {experts: 16, top_k: 4}}\n"
    "cluster: {from: dgx-h100, nodes: 2}\ntraining: {global_batch: 64, seq_len: 1024}\n"
    "plan: {tp: 1, pp: 1, dp: 16, ep: 16, micro_batch: 1, zero: 1}\n";

struct Run {
  ScenarioSpec s;
  Plan plan;
  Program program;
  Evaluation eval;
};

Run run(const std::string& yaml, const std::vector<std::string>& sets) {
  Run r{scenario(yaml, sets), {}, {}, {}};
  r.plan = complete_plan(r.s);
  const auto problems = verify(r.plan, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems.front()));
  r.program = lower(r.plan, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE(verify(r.program).empty());
  r.eval = evaluate(r.program, r.s.cluster, r.s.training);
  return r;
}

// Rank 0's bytes times count per group and collective kind, and its GEMM FLOPs.
struct Moved {
  std::map<std::pair<GroupKind, CollectiveKind>, double> bytes;
  std::map<std::pair<GroupKind, CollectiveKind>, int> count;
  double gemm_flops = 0;
};

Moved moved(const Run& r) {
  Moved m;
  for (const Task& t : r.program.roles[0].tasks) {
    m.gemm_flops += t.work.gemm_flops.value();
    if (t.kind != TaskKind::Collective) continue;
    m.bytes[{t.group, t.collective}] += t.bytes.value() * t.count;
    m.count[{t.group, t.collective}] += t.count;
  }
  return m;
}

// The compute passes of rank 0 in issue order: "F0", "B0", ... (a pass cut at its gradient buckets once).
std::vector<std::string> passes(const Run& r) {
  std::vector<std::string> out;
  for (const Task& t : r.program.roles[0].tasks) {
    if (t.kind != TaskKind::Forward && t.kind != TaskKind::Backward) continue;
    const std::string pass = (t.kind == TaskKind::Forward ? "F" : "B") + std::to_string(t.microbatch);
    if (out.empty() || out.back() != pass) out.push_back(pass);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(expert_groups_follow_megatron_cores_expert_grid) {
  Plan p;
  p.tp = 2, p.dp = 8, p.ep = 8;
  // Sharded over TP, EP is carved out of dp: the 8 DP ranks at rank 0's TP place.
  BOOST_TEST(group_members(p, 0, GroupKind::Ep) == (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}),
             tt::per_element());
  // Folded, EP is 8 consecutive ranks of the stage's tp x dp grid (tp fastest), and an expert's holders
  // are the ranks at the same place in each EP group.
  p.expert_tp = 1;
  BOOST_TEST(group_members(p, 0, GroupKind::Ep) == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}),
             tt::per_element());
  BOOST_TEST(group_members(p, 9, GroupKind::Ep) == (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}),
             tt::per_element());
  BOOST_TEST(group_members(p, 5, GroupKind::ExpertDp) == (std::vector<int>{5, 13}), tt::per_element());
  BOOST_TEST(expert_replicas(p) == 2);
  // Under pp the grid is per stage, and the rank order decides where a grid number sits.
  p.pp = 2;
  BOOST_TEST(group_members(p, 17, GroupKind::Ep) == (std::vector<int>{16, 17, 18, 19, 20, 21, 22, 23}),
             tt::per_element());
  p.order = "tp-cp-pp-dp";  // the stages alternate: a DP rank every 4
  BOOST_TEST(group_members(p, 0, GroupKind::Ep) == (std::vector<int>{0, 1, 4, 5, 8, 9, 12, 13}),
             tt::per_element());
  // ep 16 over the 16 ranks of a stage: each expert has one holder.
  p = Plan{};
  p.tp = 2, p.dp = 8, p.ep = 16, p.expert_tp = 1;
  BOOST_TEST(group_members(p, 3, GroupKind::Ep).size() == 16u);
  BOOST_TEST(group_members(p, 3, GroupKind::ExpertDp) == (std::vector<int>{3}), tt::per_element());
  BOOST_TEST(!experts_replicated(expert_replicas(p)));
}

BOOST_AUTO_TEST_CASE(folded_experts_dispatch_the_sequence_share_and_run_whole) {
  for (const char* zero : {"plan.zero=0", "plan.zero=1", "plan.zero=3"}) {
    BOOST_TEST_CONTEXT(zero) {
      const Run sharded = run(kFolding, {zero});
      const Run folded = run(kFolding, {zero, "plan.expert_tp=1"});
      const Moved a = moved(sharded), b = moved(folded);
      const auto a2a = std::pair{GroupKind::Ep, CollectiveKind::AllToAll};
      // The same all-to-alls, each of the rank's sequence-parallel share: 1/tp of the tokens.
      BOOST_TEST(b.count.at(a2a) == a.count.at(a2a));
      BOOST_TEST(b.bytes.at(a2a) == a.bytes.at(a2a) / 2, tt::tolerance(1e-12));
      // Every layer is an MoE layer: its MLP's TP all-gather and reduce-scatter are gone, attention's
      // stay (forward, backward and the backward's re-gather; the embedding's one more a pass).
      for (const CollectiveKind kind : {CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
        const auto tp = std::pair{GroupKind::Tp, kind};
        const int passes = 2 * sharded.plan.num_microbatches, layers = sharded.s.model.layers;
        const int regather = kind == CollectiveKind::AllGather ? 1 : 0;
        BOOST_TEST(a.count.at(tp) == passes * (2 * layers + 1) + regather * passes / 2 * 2 * layers);
        BOOST_TEST(b.count.at(tp) == passes * (layers + 1) + regather * passes / 2 * layers);
      }
      // The model's FLOPs on a rank are the same: each expert's rows whole instead of half their columns.
      BOOST_TEST(b.gemm_flops == a.gemm_flops, tt::tolerance(1e-9));
      // A rank holds its experts whole (1/ep of them either way), reduced over their 2 holders.
      const RankParameters ha = plan_rank_parameters(sharded.plan, sharded.s.model, sharded.s.training, 0);
      const RankParameters hb = plan_rank_parameters(folded.plan, folded.s.model, folded.s.training, 0);
      BOOST_TEST(hb.experts == 2 * ha.experts, tt::tolerance(1e-12));
      BOOST_TEST(hb.total - hb.experts == ha.total - ha.experts, tt::tolerance(1e-12));
      double expert_dp = 0;
      for (const Task& t : folded.program.roles[0].tasks)
        if (t.group == GroupKind::ExpertDp) {
          BOOST_TEST(t.placement.size == 2);
          BOOST_TEST(t.placement.per_node == 1);  // ranks 0 and 8: one on each node
          if (t.purpose == Purpose::GradientReduce) expert_dp += t.bytes.value() * t.count;
        }
      const double reduces = folded.plan.zero == 3 ? folded.plan.num_microbatches : 1;
      BOOST_TEST(expert_dp == reduces * hb.experts * cost::gradient_bytes(folded.s.training),
                 tt::tolerance(1e-9));
      // Sharded over TP, the all-to-all stays among the DP ranks of one TP place (a stride of 2, 4 a node);
      // folded, it runs among 8 consecutive ranks: one node.
      for (const Task& t : folded.program.roles[0].tasks)
        if (t.group == GroupKind::Ep) BOOST_TEST(t.placement.per_node == 8);
    }
  }
}

BOOST_AUTO_TEST_CASE(folding_is_checked_and_written) {
  BOOST_TEST(plan_problem(kFolding, {"plan.expert_tp=1"}) == "none");
  BOOST_TEST(plan_problem(kFolding, {"plan.expert_tp=1", "plan.sequence_parallel=false"})
                 .find("sequence_parallel") != std::string::npos);
  BOOST_TEST(plan_problem(kFolding, {"plan.expert_tp=1", "plan.tp=1", "plan.dp=16"}) ==
             "none");  // expert_tp = tp: no folding
  // ep 16 over tp x dp = 16 although dp is 8: folded only.
  BOOST_TEST(plan_problem(kFolding, {"plan.expert_tp=1", "plan.ep=16"}) == "none");
  BOOST_TEST(plan_problem(kFolding, {"plan.ep=16"}).find("plan.ep=16 must divide plan.dp=8") !=
             std::string::npos);
  // A width between 1 and tp names the field and the nearest valid value.
  const std::string between =
      plan_problem(kFolding, {"plan.tp=4", "plan.dp=4", "plan.ep=4", "plan.expert_tp=2"});
  BOOST_TEST(between.find("plan.expert_tp=2") != std::string::npos);
  BOOST_TEST(between.find("nearest: 1") != std::string::npos);
  // The plan file keeps it; Megatron-LM's launch says it; the optimizer refuses to search it.
  const ScenarioSpec s = scenario(kFolding, {"plan.expert_tp=1"});
  const Plan p = complete_plan(s);
  BOOST_TEST(to_yaml(p).find("expert_tp: 1\n") != std::string::npos);
  BOOST_TEST(to_yaml(complete_plan(scenario(kFolding, {}))).find("expert_tp") == std::string::npos);
  BOOST_TEST(megatron_launch(p, s).text.find("--expert-tensor-parallel-size 1") != std::string::npos);
  // The optimizer searches it where asked: every candidate folds; left out, none does (Megatron-Core's
  // default, which the live engines run).
  const SearchResult folded = search_plans(scenario(kFolding, {"plan.expert_tp=1", "plan.pp=auto"}));
  const SearchResult split = search_plans(scenario(kFolding, {"plan.expert_tp=2", "plan.pp=auto"}));
  const SearchResult open = search_plans(scenario(kFolding, {"plan.pp=auto"}));
  BOOST_REQUIRE(!folded.top.empty());
  for (const auto& c : folded.top) {
    BOOST_TEST(c.plan.expert_tp == 1);
    BOOST_TEST(verify(c.plan, s.model, s.cluster, s.training).empty());
  }
  for (const auto& c : split.top) BOOST_TEST(c.plan.expert_tp == 0);
  for (const auto& c : open.top) BOOST_TEST(c.plan.expert_tp == 0);
  BOOST_TEST(open.enumerated == split.enumerated);
}

BOOST_AUTO_TEST_CASE(without_pipelining_each_forward_runs_beside_the_backward_before_it) {
  const Run off = run(kCrossNode, {}), on = run(kCrossNode, {"plan.overlap.ep=true"});
  BOOST_TEST(passes(off) == (std::vector<std::string>{"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"}),
             tt::per_element());
  BOOST_TEST(passes(on) == (std::vector<std::string>{"F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"}),
             tt::per_element());
  BOOST_TEST(combined_1f1b_order(pipeline_order(Schedule::OneFOneB, 1, 1, 2, 0)).size() == 4u);
  // The passes followed by one of the other kind leave their all-to-alls to the Ep stream (F1 B0 F2 B1
  // F3); the others (F0, B2, B3) keep them on the TP stream, between the pass and the next.
  std::set<std::string> beside, between;
  for (const Task& t : on.program.roles[0].tasks)
    if (t.kind == TaskKind::Collective && t.collective == CollectiveKind::AllToAll)
      (t.stream == StreamKind::Ep ? beside : between).insert(t.name.substr(std::string("A2A ep ").size(), 5));
  BOOST_TEST(beside == (std::set<std::string>{"F mb1", "B mb0", "F mb2", "B mb1", "F mb3"}),
             tt::per_element());
  BOOST_TEST(between == (std::set<std::string>{"F mb0", "B mb2", "B mb3"}), tt::per_element());
  for (const Task& t : off.program.roles[0].tasks) BOOST_TEST((t.stream != StreamKind::Ep));
  // The same work, in less time: hidden all-to-alls, no longer exposed. It cannot beat the busier of the
  // compute and the all-to-alls.
  const TimeBreakdown &a = off.eval.roles[0].breakdown, &b = on.eval.roles[0].breakdown;
  BOOST_TEST(on.eval.iteration_time_s < off.eval.iteration_time_s);
  BOOST_TEST(b.exposed_comm_s < a.exposed_comm_s);
  BOOST_TEST(on.eval.iteration_time_s >= std::max(b.compute_s, b.tp_comm_s));
  // Two micro-batches' activations at once, where 1F1B holds one.
  BOOST_TEST(on.eval.roles[0].peak_memory.value() > off.eval.roles[0].peak_memory.value());
}

BOOST_AUTO_TEST_CASE(interleaved_pipelines_overlap_their_steady_state) {
  const std::vector<std::string> interleaved = {"plan.pp=2", "plan.dp=8", "plan.ep=8",
                                                "plan.schedule=interleaved", "plan.virtual_stages=2"};
  std::vector<std::string> with = interleaved;
  with.push_back("plan.overlap.ep=true");
  const Run off = run(kCrossNode, interleaved), on = run(kCrossNode, with);
  BOOST_TEST(passes(on) == passes(off), tt::per_element());  // the interleaved order pairs them already
  BOOST_TEST(on.eval.iteration_time_s < off.eval.iteration_time_s);
  // A send that waits for its pass's all-to-alls follows them on their stream, not on the PP stream,
  // where it would hold up the next pass's receive (and two stages' receives could wait on each other's
  // sends).
  const std::vector<Task>& tasks = on.program.roles[0].tasks;
  int waiting_sends = 0;
  for (const Task& t : tasks) {
    const bool waits_for_ep = std::any_of(t.deps.begin(), t.deps.end(),
                                          [&](int d) { return tasks[size_t(d)].stream == StreamKind::Ep; });
    if (t.kind != TaskKind::Send || !waits_for_ep) continue;
    ++waiting_sends;
    BOOST_TEST((t.stream == StreamKind::Ep));
  }
  // Every stage's receives and sends still meet: the evaluation ran to the end (it throws on a deadlock),
  // and so does it with more pipeline stages.
  std::vector<std::string> deeper = with;
  deeper.insert(deeper.end(), {"plan.pp=4", "plan.dp=4", "plan.ep=4"});
  BOOST_TEST(run(kCrossNode, deeper).eval.iteration_time_s > 0);
  BOOST_TEST(waiting_sends > 0);
}

BOOST_AUTO_TEST_CASE(combined_1f1b_is_checked_and_written) {
  BOOST_TEST(plan_problem(kCrossNode, {"plan.overlap.ep=true"}) == "none");
  BOOST_TEST(plan_problem(kCrossNode, {"plan.overlap.ep=true", "plan.ep=1"}).find("ep > 1") !=
             std::string::npos);
  BOOST_TEST(plan_problem(kCrossNode, {"plan.overlap.ep=true", "plan.pp=2", "plan.dp=8", "plan.ep=8"})
                 .find("interleaved") != std::string::npos);
  // Without pipelining it pairs the passes in 1F1B order: GPipe's (every forward first) has no pairs.
  BOOST_TEST(plan_problem(kCrossNode, {"plan.overlap.ep=true", "plan.schedule=gpipe"})
                 .find("pp 1 with schedule 1f1b") != std::string::npos);
  BOOST_TEST(
      plan_problem(kCrossNode, {"plan.overlap.ep=true", "plan.recompute=full"}).find("full recompute") !=
      std::string::npos);
  BOOST_TEST(plan_problem(kCrossNode, {"plan.overlap.ep=true", "plan.zero=3"}).find("zero 3") !=
             std::string::npos);
  const ScenarioSpec s = scenario(kCrossNode, {"plan.overlap.ep=true"});
  const Plan p = complete_plan(s);
  BOOST_TEST(to_yaml(p).find("ep: true}") != std::string::npos);
  BOOST_TEST(megatron_launch(p, s).text.find("--overlap-moe-expert-parallel-comm") != std::string::npos);
  // The optimizer searches the layouts combined 1F1B runs under where plan.overlap.ep asks it
  // (test_search's brute force holds its bounds); a dense model has nothing for it to overlap.
  const SearchResult r =
      search_plans(scenario(kCrossNode, {"plan.overlap.ep=true", "plan.micro_batch=auto"}), {});
  BOOST_REQUIRE(!r.top.empty());
  for (const auto& c : r.top) BOOST_TEST((c.plan.overlap_ep && c.plan.ep > 1 && c.plan.zero != 3));
  BOOST_CHECK_THROW(
      search_plans(scenario(kCrossNode, {"plan.overlap.ep=true", "plan.micro_batch=auto", "plan.zero=3"}),
                   {}),
      InputError);
  std::string dense = kCrossNode;
  dense.replace(dense.find(", moe: {experts: 16, top_k: 4}"), 30, "");
  BOOST_CHECK_THROW(
      search_plans(scenario(dense, {"plan.overlap.ep=true", "plan.ep=1", "plan.micro_batch=auto"}), {}),
      InputError);
}
