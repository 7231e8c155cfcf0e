// `paratwin simulate` end to end. Every simulation is its own process (SimGrid allows one engine per
// process); the analytic evaluator (`paratwin plan`) is the reference where contention is impossible.
#define BOOST_TEST_MODULE sim_cli
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "paratwin_process.hpp"
#include "source_tree.hpp"

namespace fs = std::filesystem;
using namespace paratwin_test;
namespace tt = boost::test_tools;

namespace {

const std::string kSource = paratwin_test::source_dir();

fs::path work_dir() {
  return test_dir("paratwin_sim_");
}

// Runs a command with `--json -` and returns its report.
nlohmann::json report(const std::string& arguments) {
  const Result r = paratwin(arguments + " --json -");
  BOOST_REQUIRE_MESSAGE(r.status == 0, "paratwin " + arguments + " failed: " + r.err);
  return nlohmann::json::parse(r.out);
}

// Writes a scenario into the work directory and returns its path.
std::string scenario_file(const std::string& name, const std::string& yaml) {
  const fs::path p = work_dir() / (name + ".yaml");
  std::ofstream(p) << yaml;
  return p.string();
}

// GPT 1.7B on 4 DGX A100 nodes; the fabric as given.
std::string four_nodes(const std::string& name, const std::string& network, const std::string& plan,
                       const std::string& extra = "") {
  return scenario_file(name, "name: " + name +
                                 "\nmodel: gpt3-1.7b\ncluster:\n  from: dgx-a100-80g\n  nodes: 4\n"
                                 "  network: " +
                                 network + "\ntraining: {global_batch: 64, seq_len: 2048}\nplan: " + plan +
                                 "\n" + extra);
}

// GPT 1.7B on 8 DGX A100 nodes in pods of two, 4:1 above them; tp 4 x cp 2 x dp 2 fills a pod per
// pipeline stage.
std::string eight_nodes_in_pods(const std::string& name, const std::string& extra) {
  return scenario_file(name, "name: " + name +
                                 "\nmodel: gpt3-1.7b\ncluster:\n  from: dgx-a100-80g\n  nodes: 8\n"
                                 "  network: {topology: fat_tree, oversubscription: 4, pod_gpus: 16, "
                                 "switch_latency: 1us}\n"
                                 "training: {global_batch: 32, seq_len: 2048}\n"
                                 "plan: {tp: 4, cp: 2, pp: 4, dp: 2, micro_batch: 1, schedule: 1f1b, "
                                 "sequence_parallel: true, zero: 1}\n" +
                                 extra);
}

const std::string kFullBisection =
    "{topology: fat_tree, oversubscription: 1, gpus_per_leaf: 8, switch_latency: 1us}";
const std::string kTwoToOne =
    "{topology: fat_tree, oversubscription: 2, gpus_per_leaf: 8, switch_latency: 1us}";
// TP inside each node, DP across nodes: one flow per NVLink port and per NIC, nothing shared.
const std::string kTp8Dp4 = "{tp: 8, pp: 1, dp: 4, micro_batch: 1, schedule: 1f1b}";

double iteration(const nlohmann::json& r) {
  return r["metrics"]["iteration_time_s"].get<double>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(without_contention_the_simulated_iteration_matches_the_analytic_one_within_1_percent) {
  const std::string quickstart = kSource + "/scenarios/quickstart.yaml";
  for (const std::string sets :
       {"--set plan.tp=8 --set plan.dp=4",
        "--set plan.tp=8 --set plan.dp=1 --set plan.pp=4 --set training.global_batch=64",
        "--set plan.tp=4 --set plan.dp=4 --set plan.pp=2 --set training.global_batch=64"}) {
    const nlohmann::json analytic = report("plan " + quickstart + " " + sets);
    const nlohmann::json simulated = report("simulate " + quickstart + " " + sets);
    BOOST_TEST_CONTEXT(sets) {
      BOOST_TEST(simulated["evaluator"] == "simulation");
      BOOST_TEST(iteration(simulated) == iteration(analytic), tt::tolerance(0.01));
      BOOST_TEST(simulated["breakdown"]["compute_s"].get<double>() ==
                     analytic["breakdown"]["compute_s"].get<double>(),
                 tt::tolerance(1e-6));
    }
  }
}

// plan.reshard after_step (ZeRO 3 gathering each unit once a step, reducing once after its last
// backward) reaches the simulator through the Program: fewer DP collectives than after_forward, the same
// memory as the analytic evaluator's, and within 2% of its time on a fabric where the DP stream's
// collectives barely meet.
BOOST_AUTO_TEST_CASE(zero3_resharding_once_a_step_simulates_as_the_program_says) {
  const std::string quickstart = kSource + "/scenarios/quickstart.yaml";
  const std::string sets =
      " --set plan.tp=4 --set plan.dp=4 --set plan.pp=2 --set training.global_batch=64 "
      "--set plan.zero=3 --set plan.reshard=";
  const nlohmann::json step = report("simulate " + quickstart + sets + "after_step");
  const nlohmann::json forward = report("simulate " + quickstart + sets + "after_forward");
  const nlohmann::json analytic = report("plan " + quickstart + sets + "after_step");
  BOOST_TEST(step["plan"]["reshard"] == "after_step");
  BOOST_TEST(iteration(step) == iteration(analytic), tt::tolerance(0.02));
  BOOST_TEST(step["metrics"]["peak_memory_gib"].get<double>() ==
                 analytic["metrics"]["peak_memory_gib"].get<double>(),
             tt::tolerance(1e-9));
  BOOST_TEST(step["metrics"]["peak_memory_gib"].get<double>() >
             forward["metrics"]["peak_memory_gib"].get<double>());
  BOOST_TEST(step["breakdown"]["dp_comm_s"].get<double>() < forward["breakdown"]["dp_comm_s"].get<double>());
}

// HSDP (plan.dp_replicate) reaches the simulator through the Program and the rank layout's shard and
// replica groups: 2 replicas of a 2-way shard group (tp 4, pp 2), resharded once a step so that the DP
// stream's collectives barely meet (as above): within 2% of the analytic evaluator's time, with its
// memory (above the whole group's shard), and the replicas' all-reduces add to the DP stream's time.
BOOST_AUTO_TEST_CASE(hsdp_simulates_as_the_program_says) {
  const std::string sets = kSource +
                           "/scenarios/quickstart.yaml --set plan.tp=4 --set plan.dp=4 --set plan.pp=2 "
                           "--set training.global_batch=64 --set plan.zero=3 --set plan.reshard=after_step "
                           "--set plan.dp_replicate=";
  const nlohmann::json hybrid = report("simulate " + sets + "2");
  const nlohmann::json whole = report("simulate " + sets + "1");
  const nlohmann::json analytic = report("plan " + sets + "2");
  BOOST_TEST(hybrid["plan"]["dp_replicate"] == 2);
  BOOST_TEST(iteration(hybrid) == iteration(analytic), tt::tolerance(0.02));
  const double peak = hybrid["metrics"]["peak_memory_gib"].get<double>();
  BOOST_TEST(peak == analytic["metrics"]["peak_memory_gib"].get<double>(), tt::tolerance(1e-9));
  BOOST_TEST(peak > whole["metrics"]["peak_memory_gib"].get<double>());
  BOOST_TEST(hybrid["breakdown"]["dp_comm_s"].get<double>() > whole["breakdown"]["dp_comm_s"].get<double>());
}

// Runs a scenario folded and with --all-ranks; returns both reports.
std::pair<nlohmann::json, nlohmann::json> folded_and_all(const std::string& scenario) {
  return {report("simulate " + scenario), report("simulate " + scenario + " --all-ranks")};
}

int simulated_ranks(const nlohmann::json& r) {
  return r["simulation"]["simulated_ranks"].get<int>();
}

BOOST_AUTO_TEST_CASE(folding_symmetric_ranks_changes_no_result) {
  const std::string interleaved =
      "{tp: 4, pp: 2, dp: 4, micro_batch: 1, schedule: interleaved, virtual_stages: 2, "
      "sequence_parallel: true, zero: 1}";
  const std::string straggler = "failures: {stragglers: {count: 1, slowdown: 1.3}}\n";
  struct Case {
    std::string scenario;
    int tp, cp, dp;  // expected folding
  };
  const std::vector<Case> cases = {
      // Every node its own leaf, 2:1 above: DP groups cross leaves, so only TP lanes fold.
      {four_nodes("fold", kTwoToOne, kTp8Dp4), 8, 1, 1},
      {four_nodes("fold-pipelined",
                  "{topology: fat_tree, oversubscription: 3, gpus_per_leaf: 8, switch_latency: 1us}",
                  interleaved, straggler),
       4, 1, 1},
      // Full bisection: TP lanes and DP replicas fold; the straggler's replicas are simulated whole.
      {four_nodes("fold-bisection", kFullBisection, interleaved, straggler), 4, 1, 2},
      // Pods of two nodes, 4:1 above: each stage's CP and DP groups inside one pod, PP across them.
      {eight_nodes_in_pods("fold-pods", ""), 4, 2, 2},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.scenario) {
      const auto [folded, all] = folded_and_all(c.scenario);
      BOOST_TEST(folded["simulation"]["folded_tp_lanes"] == c.tp);
      BOOST_TEST(folded["simulation"]["folded_cp_lanes"] == c.cp);
      BOOST_TEST(folded["simulation"]["folded_dp_replicas"] == c.dp);
      for (const char* folded_part : {"folded_tp_lanes", "folded_cp_lanes", "folded_dp_replicas"})
        BOOST_TEST(all["simulation"][folded_part] == 1);
      BOOST_TEST(folded["simulation"]["activities"].get<double>() <
                 all["simulation"]["activities"].get<double>() / 2);
      BOOST_TEST(iteration(folded) == iteration(all), tt::tolerance(1e-9));
      for (const char* part : {"dp_comm_s", "pp_comm_s", "tp_comm_s", "bubble_s"})
        BOOST_TEST(folded["breakdown"][part].get<double>() == all["breakdown"][part].get<double>(),
                   tt::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_straggler_above_an_oversubscribed_level_is_folded_within_1_percent) {
  // The straggler's replica is simulated whole beside the replica that stands for the others, and the
  // pods' uplinks are shared in proportion to the ranks each simulated one stands for: exact where
  // every flow through an uplink runs at once, close where the straggler shifts them.
  const std::string s =
      eight_nodes_in_pods("fold-pods-straggler", "failures: {stragglers: {count: 1, slowdown: 1.3}}\n");
  const auto [folded, all] = folded_and_all(s);
  BOOST_TEST(simulated_ranks(folded) < simulated_ranks(all) / 4);
  BOOST_TEST(iteration(folded) == iteration(all), tt::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(a_2_to_1_oversubscribed_fabric_slows_cross_pod_dp_allreduce_by_the_predicted_amount) {
  // Every node is its own leaf: the DP rings of all 8 lanes leave through the leaf uplinks at once.
  const std::string full = four_nodes("bisection", kFullBisection, kTp8Dp4);
  const std::string half = four_nodes("oversubscribed", kTwoToOne, kTp8Dp4);
  const double sim_full = report("simulate " + full)["breakdown"]["dp_comm_s"].get<double>();
  const double sim_half = report("simulate " + half)["breakdown"]["dp_comm_s"].get<double>();
  const double model_full = report("plan " + full)["breakdown"]["dp_comm_s"].get<double>();
  const double model_half = report("plan " + half)["breakdown"]["dp_comm_s"].get<double>();
  BOOST_TEST(sim_half / sim_full > 1.8);  // bandwidth-bound: close to 2
  BOOST_TEST(sim_half / sim_full == model_half / model_full, tt::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(
    a_ring_that_crosses_the_oversubscribed_level_twice_is_not_slowed_as_the_cost_model_fears) {
  // Leaves of two nodes, 2:1 above them. The cost model divides every cross-leaf group's bandwidth by
  // the oversubscription; a ring over 4 nodes crosses between the two leaves on only 2 of its 4 hops,
  // so each leaf's uplink carries one flow per lane: half of what it can carry.
  const std::string net = "{topology: fat_tree, oversubscription: 2, gpus_per_leaf: 16, switch_latency: 1us}";
  const std::string s = four_nodes("two-leaves", net, kTp8Dp4);
  const double simulated = report("simulate " + s)["breakdown"]["dp_comm_s"].get<double>();
  const double analytic = report("plan " + s)["breakdown"]["dp_comm_s"].get<double>();
  const double bisection =
      report("simulate " + four_nodes("flat", kFullBisection, kTp8Dp4))["breakdown"]["dp_comm_s"]
          .get<double>();
  BOOST_TEST(simulated < 0.6 * analytic);
  BOOST_TEST(simulated == bisection, tt::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(a_straggler_slows_the_whole_synchronous_step) {
  const std::string plain = four_nodes("steady", kFullBisection, kTp8Dp4);
  const std::string slow =
      four_nodes("straggler", kFullBisection, kTp8Dp4, "failures: {stragglers: {count: 1, slowdown: 1.5}}\n");
  const nlohmann::json base = report("simulate " + plain);
  const nlohmann::json straggling = report("simulate " + slow);
  BOOST_TEST(straggling["simulation"]["straggler_nodes"].size() == 1u);
  // One replica computes 1.5x slower; the DP all-reduce makes every replica wait for it.
  const double compute =
      base["breakdown"]["compute_s"].get<double>() + base["breakdown"]["recompute_s"].get<double>();
  BOOST_TEST(iteration(straggling) >= iteration(base) + 0.45 * compute);
  BOOST_TEST(iteration(straggling) <= iteration(base) * 1.55);
  // 1.5x its compute, give or take how much less of it now runs beside the DP collectives and the
  // backward's TP reduce-scatters, which hold some SMs for as long as they take.
  BOOST_TEST(straggling["breakdown"]["compute_s"].get<double>() ==
                 1.5 * base["breakdown"]["compute_s"].get<double>(),
             tt::tolerance(0.03));
}

BOOST_AUTO_TEST_CASE(a_scripted_failure_costs_exactly_the_work_since_the_last_checkpoint_plus_restart) {
  const std::string s =
      four_nodes("scripted", kFullBisection, kTp8Dp4,
                 "failures: {events: [{at: 5h, component: gpu, index: 3}], detection: 1min, "
                 "restart: 5min}\ncheckpoint: {interval: 1h}\n"
                 "elasticity: {policy: spares, spares: 8}\n");
  const nlohmann::json r = report("simulate " + s + " --horizon 10h");
  const auto& rel = r["reliability"];
  const double cost = rel["checkpoint_cost_s"].get<double>();
  BOOST_TEST(cost > 0);
  const double cycle = 3600 + cost, at = 5 * 3600;
  BOOST_TEST(rel["failures"] == 1);
  BOOST_TEST(rel["restarts"] == 1);
  BOOST_TEST(rel["horizon_s"].get<double>() == 36000);
  BOOST_TEST(rel["checkpoint_interval_s"].get<double>() == 3600);
  BOOST_TEST(rel["lost_work_s"].get<double>() == at - std::floor(at / cycle) * cycle, tt::tolerance(1e-9));
  BOOST_TEST(rel["downtime_s"].get<double>() == 60 + 300, tt::tolerance(1e-9));
  const double lost_time = rel["lost_work_s"].get<double>() + rel["downtime_s"].get<double>() +
                           rel["checkpoint_overhead_s"].get<double>();
  BOOST_TEST(rel["effective_training_time_ratio"].get<double>() == 1 - lost_time / 36000,
             tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(shrink_continues_with_fewer_gpus_while_restart_waits_for_the_repair) {
  const std::string failure =
      "failures: {events: [{at: 2h, component: host, index: 1}], detection: 1min, "
      "restart: 5min, repair: 100h}\ncheckpoint: {interval: 1h}\n";
  const std::string shrink =
      four_nodes("shrink", kFullBisection, kTp8Dp4, failure + "elasticity: {policy: shrink, min_gpus: 16}\n");
  const std::string restart =
      four_nodes("restart", kFullBisection, kTp8Dp4, failure + "elasticity: {policy: restart}\n");
  const nlohmann::json k = report("simulate " + shrink + " --horizon 6h");
  const nlohmann::json w = report("simulate " + restart + " --horizon 6h");
  BOOST_TEST(k["reliability"]["min_gpus"] == 24);
  BOOST_TEST(k["reliability"]["restarts"] == 1);
  BOOST_TEST(w["reliability"]["restarts"] == 0);
  BOOST_TEST(k["reliability"]["goodput"].get<double>() > w["reliability"]["goodput"].get<double>() + 0.3);
  // Three replicas of four: the shrunk job's tokens/s come from its own simulated iteration.
  BOOST_TEST(k["reliability"]["goodput"].get<double>() <
             k["reliability"]["effective_training_time_ratio"].get<double>());
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_byte_identical_output_and_another_seed_does_not) {
  const std::string s =
      four_nodes("seeded", kTwoToOne, kTp8Dp4,
                 "failures: {gpu: {mtbf: 20d}, host: {mtbf: 30d, distribution: weibull, shape: 0.8},"
                 " stragglers: {count: 1, slowdown: 1.2}}\n");
  const fs::path dir = work_dir();
  auto run = [&](int seed, const std::string& tag) {
    const std::string json = (dir / (tag + ".json")).string(), trace = (dir / (tag + ".trace")).string();
    const Result r = paratwin("simulate " + s + " --horizon 30d --seed " + std::to_string(seed) + " --json " +
                              json + " --trace " + trace);
    BOOST_REQUIRE_MESSAGE(r.status == 0, r.err);
    return std::make_pair(slurp(json), slurp(trace));
  };
  const auto a = run(11, "a"), b = run(11, "b"), c = run(12, "c");
  BOOST_TEST((a.first == b.first));
  BOOST_TEST((a.second == b.second));
  BOOST_TEST((a.first != c.first));
  const nlohmann::json report = nlohmann::json::parse(a.first);
  BOOST_TEST(report["reliability"]["failures"].get<int>() > 0);
  // The trace has link counters and failure markers; checkpoints are sampled with the useful tokens so far.
  const nlohmann::json trace = nlohmann::json::parse(a.second);
  int counters = 0, failures = 0, checkpoints = 0;
  double useful = 0;
  for (const auto& e : trace["traceEvents"]) {
    counters += e["ph"] == "C";
    failures += e.value("cat", "") == "failure";
    if (e.value("cat", "") != "checkpoint") continue;
    ++checkpoints;
    BOOST_TEST(e["args"]["useful_tokens"].get<double>() >= useful);  // nothing is lost at a checkpoint
    useful = e["args"]["useful_tokens"].get<double>();
  }
  BOOST_TEST(counters > 0);
  BOOST_TEST(failures == report["reliability"]["failures"].get<int>());
  BOOST_TEST((checkpoints > 0 && checkpoints <= 1000));
  // The report gives each watched link's capacity and utilization.
  const auto& links = report["simulation"]["links"];
  BOOST_TEST(links.size() > 0u);
  for (const auto& l : links) {
    BOOST_TEST(l["capacity_GBps"].get<double>() > 0);
    BOOST_TEST((l["utilization"].get<double>() >= 0 && l["utilization"].get<double>() <= 1 + 1e-9));
    BOOST_TEST(l["peak_GBps"].get<double>() >= l["mean_GBps"].get<double>());
  }
}

BOOST_AUTO_TEST_CASE(a_bad_horizon_is_an_input_error) {
  const Result r = paratwin("simulate " + kSource + "/scenarios/quickstart.yaml --horizon 12");
  BOOST_TEST(r.status == 2);
  BOOST_TEST(r.err.find("--horizon") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(iterations_run_back_to_back_and_the_report_gives_their_mean) {
  const std::string s = four_nodes("repeat", kFullBisection, kTp8Dp4);
  const nlohmann::json one = report("simulate " + s);
  const nlohmann::json three = report("simulate " + s + " --iterations 3");
  const auto& times = three["simulation"]["iteration_times_s"];
  BOOST_REQUIRE(times.size() == 3u);
  double sum = 0;
  for (const auto& t : times) sum += t.get<double>();
  BOOST_TEST(iteration(three) == sum / 3, tt::tolerance(1e-9));
  // A step starts when the previous one's optimizer is done: no overlap between iterations here.
  BOOST_TEST(times[0].get<double>() == iteration(one), tt::tolerance(1e-9));
  BOOST_TEST(times[2].get<double>() == iteration(one), tt::tolerance(1e-6));
}
