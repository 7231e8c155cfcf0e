// Where several jobs of one cluster sit: automatic packing of the jobs that leave it to ParaTwin, and
// what each placement costs its job (the fabric domains it spans, the jobs it shares them with).
#pragma once

#include <string>
#include <vector>

#include "plan/spec/jobs.hpp"

namespace paratwin {

// Packs every Auto placement onto free nodes of its pool, largest job first. A job takes whole nodes,
// so its TP and PP traffic (inside a replica's nodes) never meets another job's; of the free ranges it
// takes the one spanning the fewest fabric domains (pods, leaves: its DP traffic then crosses the
// fewest oversubscribed uplinks), then the one sharing the fewest domains with jobs already placed,
// then the first. Throws InputError at the job's placement when no run of free nodes is long enough.
void place_jobs(JobsScenario& scenario);

// The global node index (over the cluster's pools, as ClusterSites counts) of a job's first node.
int first_global_node(const ClusterSpec& cluster, const JobPlacement& placement);

// What a placement costs its job: fabric domains (full-bisection pods or leaves under oversubscribed
// uplinks) its nodes span against the fewest its size could, and the other jobs in those domains, whose
// traffic shares their uplinks with it.
struct PlacementCost {
  int domains = 1;
  int fewest_domains = 1;
  bool oversubscribed = false;  // whether the fabric has uplinks to share at all
  std::vector<std::string> sharing_with;
};

std::vector<PlacementCost> placement_costs(const JobsScenario& scenario);

// One line per job: "a: nodes [0, 4) of dgx, 1 domain (fewest 1), shares domain uplinks with b".
std::string to_text(const JobsScenario& scenario, const std::vector<PlacementCost>& costs);

}  // namespace paratwin
