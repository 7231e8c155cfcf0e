// The simulator's parts that need no SimGrid engine: where ranks sit, how collectives become flows,
// and the replay of a horizon with failures, checkpoints and restarts.
#define BOOST_TEST_MODULE sim_model
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <tuple>

#include "catalog_scenario.hpp"
#include "plan/reliability/expected_goodput.hpp"
#include "plan/search/choose.hpp"
#include "plan/topology/rank_layout.hpp"
#include "sim/flows.hpp"
#include "sim/reliability.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using paratwin_test::catalog;
using namespace paratwin::sim;
namespace tt = boost::test_tools;

namespace {

ScenarioSpec scenario(const std::string& yaml) {
  return load_scenario(parse_yaml(yaml, "test.yaml"), {}, catalog());
}

const char* kFourNodes = R"(
name: four-nodes
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 4}
training: {global_batch: 64, seq_len: 2048}
plan: {tp: 2, pp: 2, dp: 8, micro_batch: 1}
)";

// A job of 4 nodes x 8 GPUs, 4 replicas of 8 GPUs, with a checkpoint that takes 60 s.
JobShape four_node_job() {
  JobShape job;
  job.nodes = 4;
  job.gpus_per_node = 8;
  job.nics_per_node = 8;
  job.switches = 4;
  job.dp = 4;
  job.replica_gpus = 8;
  job.checkpoint_cost_s = 60;
  return job;
}

// One token per second per replica.
double per_replica(int dp) {
  return dp;
}

std::string failure_scenario(const std::string& failures, const std::string& policy) {
  return std::string(kFourNodes) + "failures: " + failures +
         "\ncheckpoint: {interval: 1h}\nelasticity: " + policy + "\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(ranks_take_coordinates_in_plan_order_and_gpus_in_rank_order) {
  const ScenarioSpec s = scenario(kFourNodes);
  const Plan plan = complete_plan(s);
  const RankLayout layout(plan, s.cluster);
  BOOST_TEST(layout.world() == 32);
  // tp-cp-dp-pp: rank = tp + 2 dp + 16 pp.
  const RankCoords c = layout.coords(21);
  BOOST_TEST(c.tp == 1);
  BOOST_TEST(c.dp == 2);
  BOOST_TEST(c.pp == 1);
  BOOST_TEST(layout.gpu_of(21) == 21);
  BOOST_TEST(layout.site(21).node == 2);
  BOOST_TEST(layout.group(21, GroupKind::Tp) == std::vector<int>({20, 21}), tt::per_element());
  BOOST_TEST(layout.group(21, GroupKind::Dp) == std::vector<int>({17, 19, 21, 23, 25, 27, 29, 31}),
             tt::per_element());
  BOOST_TEST(layout.group(21, GroupKind::Embedding) == std::vector<int>({5, 21}), tt::per_element());
  BOOST_TEST(layout.pipeline_peer(21, 0) == 5);
}

BOOST_AUTO_TEST_CASE(symmetric_ranks_fold_only_when_every_gpu_has_its_own_nic) {
  ScenarioSpec s = scenario(kFourNodes);
  const Plan plan = complete_plan(s);  // tp 2, dp 8, pp 2: rank = tp + 2 dp + 16 pp
  RankLayout folded(plan, s.cluster);
  const RankLayout::Folding f = folded.fold(s.cluster);
  BOOST_TEST(f.tp == 2);
  BOOST_TEST(f.cp == 1);
  BOOST_TEST(f.dp == 8);
  // Replica 0's lane 0 on each pipeline stage.
  BOOST_TEST(folded.simulated_ranks() == 2);
  BOOST_TEST(folded.simulated(0));
  BOOST_TEST(folded.simulated(16));
  BOOST_TEST(!folded.simulated(1));
  BOOST_TEST(!folded.simulated(2));
  s.cluster.pools.front().nic.count = 4;  // two GPUs per NIC: lanes and replicas would share it
  RankLayout shared(plan, s.cluster);
  BOOST_TEST(shared.fold(s.cluster).dp == 1);
  BOOST_TEST(shared.simulated(21));
  BOOST_TEST(shared.simulated_ranks() == 32);
}

BOOST_AUTO_TEST_CASE(a_replica_with_a_slow_gpu_is_simulated_whole) {
  const ScenarioSpec s = scenario(kFourNodes);
  const Plan plan = complete_plan(s);
  RankLayout layout(plan, s.cluster);
  std::vector<double> slowdown(size_t(layout.gpus()), 1.0);
  slowdown[6] = slowdown[7] = 1.3;  // node 0's GPUs 6 and 7: replica 3 of stage 0
  const RankLayout::Folding f = layout.fold(s.cluster, slowdown);
  BOOST_TEST(f.tp == 2);
  BOOST_TEST(f.dp == 7);  // replica 0 stands for the seven plain ones
  BOOST_TEST(layout.simulated(6));
  BOOST_TEST(layout.simulated(22));  // the slow replica's other stage
  BOOST_TEST(!layout.simulated(7));  // its lane 1: the same slowdown as lane 0
  BOOST_TEST(layout.simulated_ranks() == 4);
  slowdown[7] = 1.0;  // lanes of one TP group now differ: no TP folding
  BOOST_TEST(layout.fold(s.cluster, slowdown).tp == 1);
  BOOST_TEST(layout.simulated(7));
}

BOOST_AUTO_TEST_CASE(ring_all_gather_loads_every_nvlink_port_with_its_share_at_busbw) {
  const ScenarioSpec s = scenario(kFourNodes);
  const Plan plan = complete_plan(s);
  const RankLayout layout(plan, s.cluster);
  const PoolSpec& pool = s.cluster.pools.front();
  Task t;
  t.kind = TaskKind::Collective;
  t.collective = cost::CollectiveKind::AllGather;
  t.placement = {8, 8, false};
  t.bytes = Bytes(8e6);
  t.count = 3;
  // With the fabric's measured curve (dgx-a100-80g's all-reduce curve, which all-gathers take): the
  // busbw it gives at 8 MB, latency included; without it, the alpha-beta ring at 230 GB/s and 2 us.
  PoolSpec alpha_beta = pool;
  alpha_beta.intra_node.all_reduce_curve = std::nullopt;
  const double measured = pool.intra_node.all_reduce_curve->at(t.bytes).value();
  for (const auto& [p, busbw, latency] :
       {std::tuple{&pool, measured, 0.0}, {&alpha_beta, 230e9, 7 * 2e-6 * 3}}) {
    const auto phases = collective_phases(t, {0, 1, 2, 3, 4, 5, 6, 7}, layout, *p, s.cluster);
    BOOST_REQUIRE(phases.size() == 1u);
    BOOST_TEST(phases[0].flows.size() == 8u);
    // (p-1)/p n per member and collective, scaled so that the link's bandwidth yields the busbw.
    const double expected = 7.0 / 8 * 8e6 * 3 * (300e9 / busbw);
    for (const Flow& f : phases[0].flows) {
      BOOST_TEST((f.path == Path::NvLink));
      BOOST_TEST(f.bytes == expected, tt::tolerance(1e-9));
      BOOST_TEST(f.dst_gpu == (f.src_gpu + 1) % 8);
    }
    BOOST_TEST(phases[0].latency_s == latency, tt::tolerance(1e-9));
    // Uncontended, the flows take what the cost model says.
    const double sim_s = phases[0].latency_s + expected / p->intra_node.bandwidth.value();
    const double model_s =
        cost::collective_time(t.collective, t.bytes, t.placement, *p, s.cluster).time.value() * 3;
    BOOST_TEST(sim_s == model_s, tt::tolerance(1e-9));
  }
}

BOOST_AUTO_TEST_CASE(dp_allreduce_across_nodes_goes_hierarchical_or_through_every_members_nic) {
  const ScenarioSpec s = scenario(kFourNodes);
  const Plan plan = complete_plan(s);
  const RankLayout layout(plan, s.cluster);
  const PoolSpec& pool = s.cluster.pools.front();
  Task t;
  t.kind = TaskKind::Collective;
  t.collective = cost::CollectiveKind::AllReduce;
  t.placement = {8, 4, false};  // dp stride 2: 4 members per node on 2 nodes
  t.bytes = Bytes(200e6);
  const std::vector<int> gpus = {1, 3, 5, 7, 9, 11, 13, 15};
  const auto phases = collective_phases(t, gpus, layout, pool, s.cluster);
  const auto chosen = cost::collective_time(t.collective, t.bytes, t.placement, pool, s.cluster);
  int nic_flows = 0;
  for (const auto& ph : phases)
    for (const Flow& f : ph.flows) {
      nic_flows += f.path == Path::Nic;
      if (f.path == Path::Nic) BOOST_TEST(layout.site(f.src_gpu).node != layout.site(f.dst_gpu).node);
    }
  if (chosen.algorithm == cost::Algorithm::Hierarchical) {
    BOOST_TEST(phases.size() == 3u);
    BOOST_TEST(nic_flows == 8);  // 4 lanes, each a ring of 2 nodes
  } else {
    BOOST_TEST(phases.size() == 1u);
    BOOST_TEST(nic_flows == 8);  // 2 node boundaries, 4 channels each
  }
}

BOOST_AUTO_TEST_CASE(failures_are_deterministic_for_a_seed_and_follow_the_rate) {
  const ScenarioSpec s = scenario(failure_scenario("{gpu: {mtbf: 100d}}", "{policy: restart}"));
  const JobShape job = four_node_job();
  const double horizon = 1000 * 86400.0;
  const auto a = sample_failures(s.failures, job, horizon, 7);
  const auto b = sample_failures(s.failures, job, horizon, 7);
  const auto c = sample_failures(s.failures, job, horizon, 8);
  BOOST_REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) BOOST_TEST(a[i].at_s == b[i].at_s);
  BOOST_TEST(a.front().at_s != c.front().at_s);
  // 32 GPUs x 1000 d / (100 d + 4 h repair) ~ 318 failures.
  BOOST_TEST(a.size() > 250u);
  BOOST_TEST(a.size() < 390u);
  for (const auto& f : a) BOOST_TEST(f.node == f.index / 8);
}

BOOST_AUTO_TEST_CASE(a_scripted_failure_costs_the_work_since_the_last_checkpoint_plus_detection_and_restart) {
  // Checkpoints every hour (60 s each); the GPU fails 5 h in; a hot spare node takes its place.
  const ScenarioSpec s = scenario(
      failure_scenario("{events: [{at: 5h, component: gpu, index: 3}], detection: 1min, restart: 5min}",
                       "{policy: spares, spares: 8}"));
  const Reliability r = replay(s, four_node_job(), 10 * 3600.0, 1, per_replica);
  const double cycle = 3600 + 60, at = 5 * 3600;
  const double last_checkpoint = std::floor(at / cycle) * cycle;
  BOOST_TEST(r.failures == 1);
  BOOST_TEST(r.restarts == 1);
  BOOST_TEST(r.lost_work_s == at - last_checkpoint, tt::tolerance(1e-9));
  BOOST_TEST(r.downtime_s == 60 + 300, tt::tolerance(1e-9));
  BOOST_TEST(r.checkpoint_interval_s == 3600);
  // Everything else is training or checkpointing.
  BOOST_TEST(r.productive_s + r.lost_work_s + r.downtime_s + r.checkpoint_overhead_s == 10 * 3600.0,
             tt::tolerance(1e-9));
  BOOST_TEST(r.goodput == r.productive_s / (10 * 3600.0), tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(restart_waits_for_the_repair_and_shrink_goes_on_with_fewer_gpus) {
  const std::string failure =
      "{events: [{at: 5h, component: host, index: 2}], detection: 1min, restart: 5min, "
      "repair: 100h}";
  const ScenarioSpec waits = scenario(failure_scenario(failure, "{policy: restart}"));
  const ScenarioSpec shrinks = scenario(failure_scenario(failure, "{policy: shrink, min_gpus: 16}"));
  const Reliability w = replay(waits, four_node_job(), 10 * 3600.0, 1, per_replica);
  const Reliability k = replay(shrinks, four_node_job(), 10 * 3600.0, 1, per_replica);
  BOOST_TEST(w.restarts == 0);  // the node is back after the horizon
  BOOST_TEST(w.downtime_s == 5 * 3600.0, tt::tolerance(1e-9));
  BOOST_TEST(k.restarts == 1);
  BOOST_TEST(k.min_gpus == 24);  // one replica of 8 GPUs gone with the node
  BOOST_TEST(k.goodput > w.goodput);
  BOOST_TEST(k.effective_training_time_ratio > w.effective_training_time_ratio);
  // After the restart it runs at 3/4 of the tokens per second: goodput is below the time ratio.
  BOOST_TEST(k.goodput < k.effective_training_time_ratio);
}

BOOST_AUTO_TEST_CASE(young_daly_interval_and_the_best_interval_found_agree) {
  const ScenarioSpec s = scenario(std::string(kFourNodes) +
                                  "failures: {gpu: {mtbf: 20d}, detection: 1min, restart: 5min, repair: 1h}\n"
                                  "checkpoint: {interval: auto}\nelasticity: {policy: spares, spares: 8}\n");
  const Reliability r = replay(s, four_node_job(), 400 * 86400.0, 3, per_replica);
  const double mtbf = 20 * 86400.0 / 32;
  BOOST_TEST(r.job_mtbf_s == mtbf, tt::tolerance(1e-9));
  BOOST_TEST(r.young_daly_interval_s == std::sqrt(2 * mtbf * 60), tt::tolerance(1e-9));
  BOOST_TEST(r.checkpoint_interval_s == r.optimal_checkpoint_interval_s);
  BOOST_TEST(r.optimal_checkpoint_interval_s > r.young_daly_interval_s / 2);
  BOOST_TEST(r.optimal_checkpoint_interval_s < r.young_daly_interval_s * 2);
  BOOST_TEST(r.failures > 500);
  BOOST_TEST(r.goodput < 1);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_written_behind_the_training_counts_only_once_it_is_on_disk) {
  // Snapshots every hour hold training up 60 s; each is then written for 10 min behind the training.
  const auto lost_at = [](const std::string& at) {
    const ScenarioSpec s = scenario(failure_scenario(
        "{events: [{at: " + at + ", component: gpu, index: 3}], detection: 1min, restart: 5min}",
        "{policy: spares, spares: 8}"));
    JobShape job = four_node_job();
    job.checkpoint_write_behind_s = 600;
    const Reliability r = replay(s, job, 10 * 3600.0, 1, per_replica);
    BOOST_TEST(r.productive_s + r.lost_work_s + r.downtime_s + r.checkpoint_overhead_s == 10 * 3600.0,
               tt::tolerance(1e-9));
    return r.lost_work_s;
  };
  const double snapshot_end = 3600 + 60;
  // While the first checkpoint is written, a failure loses everything since the start.
  BOOST_TEST(lost_at("4000s") == 3600 + (4000 - snapshot_end), tt::tolerance(1e-9));
  // Once it is on disk, only what came after its snapshot.
  BOOST_TEST(lost_at("5000s") == 5000 - snapshot_end, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(a_shrunk_job_grows_back_at_the_first_checkpoint_after_the_repair) {
  const std::string failure =
      "{events: [{at: 5h, component: host, index: 2}], detection: 1min, restart: 5min, repair: 2h}";
  const ScenarioSpec s = scenario(failure_scenario(failure, "{policy: shrink, min_gpus: 16}"));
  JobShape job = four_node_job();
  const Reliability stays = replay(s, job, 10 * 3600.0, 1, per_replica);
  job.regrow_at_checkpoint = true;
  const Reliability grows = replay(s, job, 10 * 3600.0, 1, per_replica);
  BOOST_TEST(stays.restarts == 1);
  BOOST_TEST(grows.restarts == 2);  // after the failure, and to grow back
  BOOST_TEST(grows.min_gpus == 24);
  bool stopped = false;
  for (const auto& e : grows.events) stopped = stopped || e.what == "stop to grow back to 32 GPUs";
  BOOST_TEST(stopped);
  BOOST_TEST(grows.downtime_s == stays.downtime_s + 300, tt::tolerance(1e-9));
  // Three hours on four replicas instead of three are worth the five minutes of restart.
  BOOST_TEST(grows.goodput > stays.goodput);
  BOOST_TEST(
      grows.productive_s + grows.lost_work_s + grows.downtime_s + grows.checkpoint_overhead_s == 10 * 3600.0,
      tt::tolerance(1e-9));
}

// The closed form the optimizer ranks plans by (plan/reliability/expected_goodput.hpp) against the
// replayed horizon on the catalog's failure scenario, its plan fixed as the optimizer chooses it, under
// each elastic policy: within 2 points of goodput.
BOOST_AUTO_TEST_CASE(closed_form_goodput_agrees_with_the_replayed_horizon_on_the_catalog_failures) {
  for (const char* policy : {"shrink", "spares", "restart"}) {
    const ScenarioSpec s = load_scenario(
        paratwin_test::source_dir() + "/scenarios/failures-16k-h100.yaml",
        {parse_override("plan={tp: 4, pp: 16, dp: 64, cp: 4, micro_batch: 1, schedule: interleaved, "
                        "virtual_stages: 4, sequence_parallel: true, zero: 1}"),
         parse_override(std::string("elasticity.policy=") + policy), parse_override("elasticity.spares=16")});
    const Plan plan = choose_plan(s, "", {}).plan;
    const Program program = lower(plan, s.model, s.cluster, s.training, {.task_names = false});
    const JobShape job = job_shape(s, plan, program);
    BOOST_TEST(job.nodes == 2048);
    BOOST_TEST(job.replica_gpus == 256);
    BOOST_TEST_CONTEXT(policy) {
      const ExpectedGoodput expected = expected_goodput(s, job);
      // The mean of four 120-day horizons: waiting for every repair (restart) makes one horizon's
      // goodput swing by a few points.
      double replayed = 0;
      for (int seed = 1; seed <= 4; ++seed) {
        const Reliability r = replay(s, job, 120 * 86400.0, seed, per_replica);
        BOOST_TEST(expected.job_mtbf_s == r.job_mtbf_s, tt::tolerance(1e-9));
        BOOST_TEST(expected.young_daly_interval_s == r.young_daly_interval_s, tt::tolerance(1e-9));
        replayed += r.goodput / 4;
      }
      BOOST_TEST_MESSAGE(policy << ": closed form " << expected.goodput << ", replayed " << replayed);
      BOOST_TEST(std::abs(expected.goodput - replayed) < 0.02, expected.goodput << " vs " << replayed);
      BOOST_TEST(expected.goodput < 1);
    }
  }
}
