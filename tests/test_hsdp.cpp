// plan.dp_replicate: HSDP (PyTorch FSDP's HYBRID_SHARD, torchtitan's dp_replicate, DeepSpeed's MiCS) in
// the lowered Program (gathers and reduce-scatters in the shard group, each shard all-reduced over the
// replicas), its memory, the rank groups the simulator uses, verification, the search, the plan file and
// DeepSpeed's MiCS.
#define BOOST_TEST_MODULE hsdp
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <set>

#include "evaluated_plan.hpp"
#include "plan/report/emit.hpp"
#include "plan/report/import_deepspeed.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/topology/rank_layout.hpp"

using namespace paratwin;

namespace {

using paratwin_test::evaluated_plan;
using Evaluated = paratwin_test::EvaluatedPlan;

std::vector<const Task*> tasks(const Role& role, Purpose purpose) {
  std::vector<const Task*> out;
  for (const Task& t : role.tasks)
    if (t.purpose == purpose) out.push_back(&t);
  return out;
}

// 24 layers over 32 data-parallel ranks, 8 a node on 4 nodes joined by a slow network; 4 micro-batches.
const std::string kDataParallel =
    "model: gpt3-1.7b\ncluster: {from: a100-pcie-ethernet, nodes: 4}\n"
    "training: {global_batch: 256}\n"
    "plan: {tp: 1, pp: 1, dp: 32, micro_batch: 2, zero: 3}\n";

}  // namespace

// With 4 replicas of an 8-way shard group (one node each), every gather and reduce-scatter stays in a
// node and each reduce-scatter's shard (an eighth of the unit's gradient) is all-reduced over the 4
// nodes, one member a node, right after it.
BOOST_AUTO_TEST_CASE(the_shard_group_gathers_and_the_replicas_all_reduce_each_shard) {
  const Evaluated full = evaluated_plan(kDataParallel, {}),
                  hybrid = evaluated_plan(kDataParallel, {"plan.dp_replicate=4"});
  const Role& role = hybrid.program.roles[0];
  const auto gathers = tasks(role, Purpose::PassGather);
  const auto reduces = tasks(role, Purpose::GradientReduce);
  const auto replicas = tasks(role, Purpose::ReplicaReduce);
  BOOST_TEST(gathers.size() == tasks(full.program.roles[0], Purpose::PassGather).size());
  BOOST_TEST(replicas.size() == reduces.size());
  for (const Task* g : gathers) {
    BOOST_TEST(g->placement.size == 8);
    BOOST_TEST(g->placement.per_node == 8);
  }
  for (size_t i = 0; i < reduces.size(); ++i) {
    const Task& rs = *reduces[i];
    const Task& ar = *replicas[i];
    BOOST_TEST(rs.placement.size == 8);
    BOOST_TEST((ar.group == GroupKind::DpReplicate));
    BOOST_TEST((ar.collective == cost::CollectiveKind::AllReduce));
    BOOST_TEST(ar.placement.size == 4);
    BOOST_TEST(ar.placement.per_node == 1);
    BOOST_TEST(ar.bytes.value() == rs.bytes.value() / 8);
    BOOST_TEST(ar.deps.size() == 1u);
    BOOST_TEST(&role.tasks[size_t(ar.deps.front())] == &rs);
  }
  // The whole-group plan's gathers cross the slow network; HSDP's cross it once a micro-batch, an eighth
  // of the gradients: a faster step.
  for (const Task* g : tasks(full.program.roles[0], Purpose::PassGather)) BOOST_TEST(g->placement.size == 32);
  BOOST_TEST_INFO(full.eval.iteration_time_s << " " << hybrid.eval.iteration_time_s);
  BOOST_TEST(hybrid.eval.iteration_time_s < full.eval.iteration_time_s);
}

// The model state is sharded over the shard group only: 4 times the whole-group plan's, per rank.
BOOST_AUTO_TEST_CASE(the_model_state_is_sharded_over_the_shard_group) {
  const Evaluated full = evaluated_plan(kDataParallel, {}),
                  hybrid = evaluated_plan(kDataParallel, {"plan.dp_replicate=4"});
  const cost::ModelStateBytes& a = full.program.roles[0].state;
  const cost::ModelStateBytes& b = hybrid.program.roles[0].state;
  BOOST_TEST(b.weights.value() == 4 * a.weights.value(), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(b.optimizer.value() == 4 * a.optimizer.value(), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(b.gradients.value() == 4 * a.gradients.value(), boost::test_tools::tolerance(1e-9));
  // dp_replicate = dp: a shard group of one, every rank a whole copy (DDP with ZeRO 3's per-layer flow).
  const Evaluated ddp = evaluated_plan(kDataParallel, {"plan.dp_replicate=32"});
  BOOST_TEST(ddp.program.roles[0].state.weights.value() == 32 * a.weights.value(),
             boost::test_tools::tolerance(1e-9));
}

// The groups the simulator and the Chakra export run collectives in: the shard groups partition the
// ranks into consecutive dp blocks, the replica groups join the same place of every block.
BOOST_AUTO_TEST_CASE(shard_and_replica_groups_partition_the_ranks) {
  const Evaluated r = evaluated_plan(kDataParallel, {"plan.dp_replicate=4", "plan.tp=2", "plan.dp=16"});
  const RankLayout layout(r.plan, r.s.cluster);
  std::set<std::vector<int>> shards, replicas;
  for (int rank = 0; rank < r.plan.gpus(); ++rank) {
    const std::vector<int> shard = layout.group(rank, GroupKind::Dp);
    const std::vector<int> replica = layout.group(rank, GroupKind::DpReplicate);
    BOOST_TEST(shard.size() == 4u);
    BOOST_TEST(replica.size() == 4u);
    BOOST_TEST(std::count(shard.begin(), shard.end(), rank) == 1);
    BOOST_TEST(std::count(replica.begin(), replica.end(), rank) == 1);
    for (int m : shard) BOOST_TEST(layout.coords(m).dp / 4 == layout.coords(rank).dp / 4);
    for (int m : replica) BOOST_TEST(layout.coords(m).dp % 4 == layout.coords(rank).dp % 4);
    shards.insert(shard);
    replicas.insert(replica);
  }
  // tp 2 x 4 replicas of shard groups, and tp 2 x 4 places in a shard group.
  BOOST_TEST(shards.size() == 8u);
  BOOST_TEST(replicas.size() == 8u);
  // Without HSDP the DP group is every replica.
  const Evaluated plain = evaluated_plan(kDataParallel, {"plan.tp=2", "plan.dp=16"});
  BOOST_TEST(RankLayout(plain.plan, plain.s.cluster).group(0, GroupKind::Dp).size() == 16u);
}

BOOST_AUTO_TEST_CASE(verify_and_the_scenario_refuse_what_hsdp_cannot_be) {
  const Evaluated r = evaluated_plan(kDataParallel, {"plan.dp_replicate=4"});
  Plan odd = r.plan;
  odd.dp_replicate = 3;
  auto problems = verify(odd, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE(!problems.empty());
  BOOST_TEST(problems.front().find("dp_replicate=3 must divide dp=32 (nearest: 2 or 4;") == 0u,
             problems.front());
  Plan zero1 = r.plan;
  zero1.zero = 1;
  problems = verify(zero1, r.s.model, r.s.cluster, r.s.training);
  BOOST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems.front() ==
             "dp_replicate=4 replicates ZeRO 3's shard group (HSDP), and the plan has zero 1: use zero 3, or "
             "dp_replicate 1");
  // In the scenario, at the key.
  try {
    paratwin_test::scenario(kDataParallel, {"plan.zero=2", "plan.dp_replicate=2"});
    BOOST_FAIL("zero 2 with dp_replicate was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("plan.dp_replicate: 2 replicates ZeRO 3's shard group") !=
               std::string::npos);
  }
}

// The search keeps plan.dp_replicate as asked (zero 3, dp a multiple of it): the pruned search finds
// the brute force's best, so its bounds hold with the shard group's collectives and memory.
BOOST_AUTO_TEST_CASE(the_search_keeps_the_replicas_asked_and_its_bounds_hold) {
  const ScenarioSpec s = paratwin_test::scenario(
      "model: {name: small, layers: 8, hidden: 512, heads: 8, vocab: 4096, seq_len: 512}\n"
      "cluster: {from: a100-pcie-ethernet, nodes: 2}\n"
      "training: {global_batch: 32, seq_len: 512}\n"
      "plan: {dp_replicate: 2}\n");
  for (const Candidate& c : paratwin_test::brute_force_top(s)) {
    BOOST_TEST(c.plan.zero == 3);
    BOOST_TEST(c.plan.dp_replicate == 2);
    BOOST_TEST(c.plan.dp % 2 == 0);
  }
}

// Left out, HSDP over one-node shard groups is a choice of the search: on a slow network with ZeRO 3
// asked for, it wins (the gathers stay in a node), and the pruned search still finds the brute force's
// best.
BOOST_AUTO_TEST_CASE(the_search_chooses_hsdp_where_it_wins) {
  const ScenarioSpec s = paratwin_test::scenario(
      "model: {name: small, layers: 8, hidden: 512, heads: 8, vocab: 4096, seq_len: 512}\n"
      "cluster: {from: a100-pcie-ethernet, nodes: 2}\n"
      "training: {global_batch: 32, seq_len: 512}\n"
      "plan: {zero: 3}\n");
  const std::vector<Candidate> top = paratwin_test::brute_force_top(s);
  BOOST_TEST_INFO(top.front().plan.dp << " x tp " << top.front().plan.tp);
  BOOST_TEST(top.front().plan.dp_replicate > 1);
  bool whole_group = false;
  for (const Candidate& c : top) whole_group |= c.plan.dp_replicate == 1;
  BOOST_TEST(whole_group);  // the other choice was searched too
}

// The plan file carries it; the Program verifier checks each replica all-reduce against its plan.
BOOST_AUTO_TEST_CASE(the_plan_file_and_the_program_verifier_follow_the_choice) {
  Evaluated r = evaluated_plan(kDataParallel, {"plan.dp_replicate=4"});
  BOOST_TEST(to_yaml(r.plan).find("\ndp_replicate: 4\n") != std::string::npos);
  BOOST_TEST(to_yaml(evaluated_plan(kDataParallel, {}).plan).find("dp_replicate") == std::string::npos);
  r.program.plan.dp_replicate = 1;
  const auto problems = verify(r.program);
  BOOST_REQUIRE(!problems.empty());
  BOOST_TEST(problems.front().find("belongs to HSDP (zero 3 with dp_replicate > 1)") != std::string::npos);
}

// DeepSpeed runs it as MiCS: --emit deepspeed writes the shard size, and the import reads it back.
BOOST_AUTO_TEST_CASE(deepspeed_runs_it_as_mics_and_the_import_reads_it_back) {
  const Evaluated r = evaluated_plan(kDataParallel, {"plan.dp_replicate=4"});
  const EmittedConfig ds = deepspeed_config(r.plan, r.s);
  BOOST_TEST(nlohmann::json::parse(ds.text)["zero_optimization"]["mics_shard_size"] == 8);
  const ImportedLaunch back = import_deepspeed(ds.text, "ds.json", r.s.model, r.s.training.seq_len, 32);
  BOOST_TEST(back.plan.dp == 32);
  BOOST_TEST(back.plan.dp_replicate == 4);
  BOOST_TEST(nlohmann::json::parse(
                 deepspeed_config(evaluated_plan(kDataParallel, {}).plan, r.s).text)["zero_optimization"]
                 .count("mics_shard_size") == 0u);
}
