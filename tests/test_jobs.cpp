// Scenarios of several jobs on one cluster: loading, placement errors with their file:line:col and the
// nearest valid spelling, automatic packing and what a placement costs each job.
#define BOOST_TEST_MODULE jobs
#include <boost/test/unit_test.hpp>

#include "catalog_scenario.hpp"
#include "plan/search/plan_jobs.hpp"
#include "plan/spec/jobs.hpp"
#include "plan/topology/job_placement.hpp"

using namespace paratwin;
using paratwin_test::catalog;

namespace {

// 8 DGX A100 nodes in pods of two nodes, 4:1 above the pods; `jobs` is the jobs: list.
std::string on_pods(const std::string& jobs) {
  return "name: shared\ncluster:\n  from: dgx-a100-80g\n  nodes: 8\n"
         "  network: {topology: fat_tree, oversubscription: 4, pod_gpus: 16, switch_latency: 1us}\n"
         "jobs:\n" +
         jobs;
}

std::string job(const std::string& name, const std::string& placement,
                const std::string& plan = "{tp: 8, pp: 1, dp: 2, micro_batch: 1}") {
  return "  - name: " + name +
         "\n    model: gpt3-1.7b\n    training: {global_batch: 24, seq_len: 2048}\n    plan: " + plan +
         "\n    placement: " + placement + "\n";
}

JobsScenario load(const std::string& yaml) {
  return load_jobs_scenario(parse_yaml(yaml, "jobs.yaml"), {}, catalog());
}

std::string error_of(const std::string& yaml) {
  try {
    JobsScenario s = load(yaml);
    place_jobs(s);
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

bool has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  BOOST_TEST_MESSAGE("'" + part + "' not in: " + text);
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_job_gets_its_own_scenario_on_its_share_of_the_cluster) {
  const JobsScenario s = load(on_pods(job("a", "{nodes: [0, 2]}") + job("b", "{nodes: 2}")));
  BOOST_TEST(s.jobs.size() == 2u);
  BOOST_TEST(s.cluster.gpus() == 64);
  BOOST_TEST(s.jobs[0].scenario.cluster.gpus() == 16);
  BOOST_TEST(s.jobs[0].scenario.model.layers == 24);
  BOOST_TEST((s.jobs[0].placement.kind == PlacementKind::Nodes));
  BOOST_TEST((s.jobs[1].placement.kind == PlacementKind::Auto));
  BOOST_TEST(s.jobs[1].placement.nodes == 2);
}

BOOST_AUTO_TEST_CASE(auto_placement_takes_its_size_from_a_fixed_plan) {
  const JobsScenario s = load(on_pods(job("a", "auto", "{tp: 8, pp: 2, dp: 2, micro_batch: 1}")));
  BOOST_TEST(s.jobs[0].placement.nodes == 4);
}

BOOST_AUTO_TEST_CASE(packing_keeps_a_job_inside_one_pod_and_off_other_jobs_pods) {
  // a takes nodes 1 and 2 (pods 0 and 1); b (2 nodes) fits in [3, 5) (pods 1, 2), [4, 6) (pod 2 alone),
  // [5, 7) or [6, 8): it goes to the first that spans one pod and shares none, [4, 6).
  JobsScenario s = load(on_pods(job("a", "{nodes: [1, 3]}") + job("b", "{nodes: 2}")));
  place_jobs(s);
  BOOST_TEST(s.jobs[1].placement.first_node == 4);
  const std::vector<PlacementCost> costs = placement_costs(s);
  BOOST_TEST(costs[0].domains == 2);
  BOOST_TEST(costs[0].fewest_domains == 1);
  BOOST_TEST(costs[1].domains == 1);
  BOOST_TEST(costs[1].sharing_with.empty());
  BOOST_TEST(costs[0].oversubscribed);
}

BOOST_AUTO_TEST_CASE(jobs_straddling_one_pod_share_its_uplink) {
  JobsScenario s = load(on_pods(job("a", "{nodes: [1, 3]}") + job("b", "{nodes: [3, 5]}")));
  place_jobs(s);
  const std::vector<PlacementCost> costs = placement_costs(s);
  BOOST_TEST(costs[0].sharing_with == std::vector<std::string>{"b"});
  BOOST_TEST(costs[1].sharing_with == std::vector<std::string>{"a"});
}

BOOST_AUTO_TEST_CASE(planning_chooses_a_plan_per_job_for_its_nodes) {
  const PlannedJobs p = plan_jobs(load(on_pods(job("a", "{nodes: [0, 2]}") + job("b", "{nodes: 4}", "auto"))),
                                  SearchOptions{1, false});
  BOOST_TEST(p.plans.size() == 2u);
  BOOST_TEST(p.plans[0].plan.gpus() == 16);
  BOOST_TEST(p.plans[1].plan.gpus() == 32);
  BOOST_TEST(p.plans[1].search.has_value());
}

BOOST_AUTO_TEST_CASE(overlapping_placements_are_an_error_at_the_later_one) {
  const std::string e = error_of(on_pods(job("a", "{nodes: [0, 2]}") + job("b", "{nodes: [1, 3]}")));
  BOOST_TEST(has(e, "jobs.yaml:16:16"));
  BOOST_TEST(has(e, "overlaps job 'a' on [0, 2)"));
  BOOST_TEST(has(e, "nodes [1, 2) are in both"));
}

BOOST_AUTO_TEST_CASE(a_placement_past_its_pool_is_an_error) {
  const std::string e = error_of(on_pods(job("a", "{nodes: [7, 9]}")));
  BOOST_TEST(has(e, "jobs.yaml:11:16"));
  BOOST_TEST(has(e, "passes the end of pool 'dgx', which has 8 nodes"));
}

BOOST_AUTO_TEST_CASE(jobs_that_need_more_nodes_than_the_pool_has_are_an_error) {
  const std::string e =
      error_of(on_pods(job("a", "{nodes: [0, 4]}", "{tp: 8, pp: 1, dp: 4, micro_batch: 1}") +
                       job("b", "{nodes: 6}", "{tp: 8, pp: 1, dp: 6, micro_batch: 1}")));
  BOOST_TEST(has(e, "take 10 nodes of pool 'dgx', which has 8"));
}

BOOST_AUTO_TEST_CASE(packing_that_finds_no_run_of_free_nodes_is_an_error) {
  const std::string e = error_of(on_pods(job("a", "{nodes: [2, 4]}") + job("b", "{nodes: [6, 8]}") +
                                         job("c", "{nodes: 3}", "{tp: 8, pp: 1, dp: 3, micro_batch: 1}")));
  BOOST_TEST(has(e, "no 3 consecutive free nodes are left in pool 'dgx' for job 'c'"));
}

BOOST_AUTO_TEST_CASE(misspelled_keys_and_values_get_the_nearest_valid_one) {
  BOOST_TEST(has(error_of(on_pods(job("a", "{nodse: [0, 2]}"))), "unknown key 'nodse'"));
  BOOST_TEST(has(error_of(on_pods(job("a", "{nodse: [0, 2]}"))), "did you mean 'nodes'"));
  BOOST_TEST(has(error_of(on_pods(job("a", "{pool: dgz}"))), "did you mean 'dgx'"));
  BOOST_TEST(has(error_of(on_pods(job("a", "atuo"))), "did you mean 'auto'"));
  std::string misspelled = job("a", "{nodes: [0, 2]}");
  misspelled.replace(misspelled.find("placement"), 9, "placment");
  BOOST_TEST(has(error_of(on_pods(misspelled)), "did you mean 'placement'"));
  BOOST_TEST(has(error_of(on_pods(job("a", "{nodes: [0, 2]}")) + "jbos: 1\n"), "did you mean 'jobs'"));
}

BOOST_AUTO_TEST_CASE(a_job_s_own_errors_are_reported_at_its_lines_with_its_name) {
  const std::string e = error_of(on_pods(job("a", "{nodes: [0, 4]}")));
  BOOST_TEST(has(e, "jobs.yaml:10:"));
  BOOST_TEST(has(e, "job 'a': dp x tp x pp x cp = 16 but the cluster has 32 GPUs"));
  BOOST_TEST(has(e, "give the job placement: {nodes: 2}"));
}

BOOST_AUTO_TEST_CASE(auto_placement_of_an_automatic_plan_needs_a_size) {
  BOOST_TEST(
      has(error_of(on_pods(job("a", "auto", "auto"))), "give them, or the size: placement: {nodes: N}"));
}

BOOST_AUTO_TEST_CASE(two_jobs_of_one_name_and_empty_ranges_are_errors) {
  BOOST_TEST(has(error_of(on_pods(job("a", "{nodes: [0, 2]}") + job("a", "{nodes: [2, 4]}"))),
                 "a second job named 'a'"));
  BOOST_TEST(has(error_of(on_pods(job("a", "{nodes: [2, 2]}"))), "is empty"));
}

BOOST_AUTO_TEST_CASE(a_one_job_command_refuses_a_scenario_of_several_jobs) {
  try {
    load_scenario(parse_yaml(on_pods(job("a", "{nodes: [0, 2]}")), "jobs.yaml"), {}, catalog());
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(has(e.what(), "holds several jobs"));
  }
}
