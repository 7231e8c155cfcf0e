// Several jobs on one cluster simulated together: jobs that share no link do not slow each other, and
// jobs whose DP traffic meets on one oversubscribed uplink slow each other by what that uplink's
// capacity says. Each simulation runs in its own child process (simulate_jobs forks them).
#define BOOST_TEST_MODULE sim_jobs
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "catalog_scenario.hpp"
#include "paratwin_process.hpp"
#include "plan/search/plan_jobs.hpp"
#include "sim/jobs.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using paratwin_test::catalog;
namespace tt = boost::test_tools;

namespace {

// GPT 1.7B, TP 8 inside each node and DP 2 across two nodes; the gradient all-reduce after the backward
// pass (not overlapped), so that the fabric's share of it shows in the iteration.
std::string job(const std::string& name, const std::string& nodes) {
  return "  - name: " + name +
         "\n    model: gpt3-1.7b\n    training: {global_batch: 4, seq_len: 2048}\n"
         "    plan: {tp: 8, pp: 1, dp: 2, micro_batch: 2, schedule: 1f1b, overlap: {dp: false}}\n"
         "    placement: {nodes: " +
         nodes + "}\n";
}

// 6 DGX A100 nodes: pods of two nodes (16 GPUs) under uplinks `oversubscription`:1.
std::string six_nodes(double oversubscription, const std::string& jobs) {
  return "name: shared\ncluster:\n  from: dgx-a100-80g\n  nodes: 6\n"
         "  network: {topology: fat_tree, oversubscription: " +
         std::to_string(oversubscription) + ", pod_gpus: 16, switch_latency: 1us}\njobs:\n" + jobs;
}

struct Run {
  PlannedJobs planned;
  sim::JobsSimulation result;
};

Run simulate(const std::string& yaml) {
  Run r{plan_jobs(load_jobs_scenario(parse_yaml(yaml, "jobs.yaml"), {}, catalog()), SearchOptions{1, false}),
        {}};
  std::vector<Plan> plans;
  for (const ChosenPlan& c : r.planned.plans) plans.push_back(c.plan);
  r.result = sim::simulate_jobs(r.planned.scenario, plans, sim::JobsSimulateOptions{2});
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(jobs_on_disjoint_nodes_of_a_full_bisection_fabric_do_not_slow_each_other) {
  // Nodes 1-2 and 3-4: the same pods as below, but nothing above the pods is oversubscribed.
  const Run r = simulate(six_nodes(1, job("a", "[1, 3]") + job("b", "[3, 5]")));
  BOOST_TEST(r.result.jobs.size() == 2u);
  for (const sim::JobOutcome& o : r.result.jobs) {
    BOOST_TEST(o.alone_s > 0);
    BOOST_TEST(o.together_s == o.alone_s, tt::tolerance(0.005));
  }
  BOOST_TEST(r.result.shared_links.empty());
}

BOOST_AUTO_TEST_CASE(jobs_whose_dp_traffic_crosses_one_oversubscribed_uplink_slow_each_other_by_its_share) {
  // a on nodes 1-2 (pods 0 and 1), b on nodes 3-4 (pods 1 and 2): both jobs' all-reduces cross pod 1's
  // uplink, each pod's uplink alone having the bandwidth of 16 NICs / 4, less than the 8 NICs of the node
  // behind it: the uplink bounds each job's all-reduce. Beside the other job, each gets half of it.
  const double oversubscription = 4;
  const Run r = simulate(six_nodes(oversubscription, job("a", "[1, 3]") + job("b", "[3, 5]")));
  const PoolSpec& pool = r.planned.scenario.cluster.pools.front();
  const double nic_Bps = pool.nic.achievable.value_or(pool.nic.bandwidth).value();
  const double uplink_Bps = 2 * pool.nic.count * nic_Bps / oversubscription;  // two nodes per pod
  BOOST_REQUIRE(r.result.shared_links.size() == 1u);
  const sim::LinkBytes& shared = r.result.shared_links.front();
  BOOST_TEST(shared.link == "domain1-uplink");
  BOOST_TEST(shared.capacity_Bps == uplink_Bps, tt::tolerance(1e-9));
  BOOST_TEST(shared.bytes[0] == shared.bytes[1], tt::tolerance(1e-9));
  for (size_t j = 0; j < 2; ++j) {
    const sim::JobOutcome& o = r.result.jobs[j];
    // The other job's bytes through the uplink, half in each direction, at the uplink's rate: the time
    // its all-reduce now waits for the other's share.
    const double other_bytes = shared.bytes[1 - j];
    const double expected_extra_s = other_bytes / 2 / uplink_Bps;
    BOOST_TEST(o.slowdown() > 1.05);
    BOOST_TEST(o.together_s - o.alone_s == expected_extra_s, tt::tolerance(0.03));
  }
}

BOOST_AUTO_TEST_CASE(simulate_on_the_command_line_reports_each_job_and_refuses_one_job_flags) {
  const paratwin_test::Result ok = paratwin_test::paratwin("simulate " + paratwin_test::source_dir() +
                                                           "/scenarios/two-jobs.yaml --json -");
  BOOST_REQUIRE_MESSAGE(ok.status == 0, ok.err);
  const auto json = nlohmann::json::parse(ok.out);
  BOOST_TEST(json["jobs"].size() == 3u);
  BOOST_TEST(json["jobs"][0]["slowdown"].get<double>() > 1.05);
  BOOST_TEST(json["jobs"][2]["slowdown"].get<double>() == 1.0, tt::tolerance(0.005));
  BOOST_TEST(json["jobs"][2]["placement"]["packed"].get<bool>());
  BOOST_TEST(json["shared_links"][0]["link"].get<std::string>() == "domain1-uplink");
  const paratwin_test::Output refused = paratwin_test::run_paratwin(
      "simulate " + paratwin_test::source_dir() + "/scenarios/two-jobs.yaml --horizon 1d");
  BOOST_TEST(refused.status == 2);
  BOOST_TEST(refused.text.find("--horizon applies to a scenario of one job") != std::string::npos);
}
