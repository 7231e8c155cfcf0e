// A scenario of several training jobs that share one cluster (`jobs:`): each job is a scenario of its
// own (model, training, plan or auto) on the nodes its placement gives it, a node range, a pool, or
// nodes packed automatically (plan/topology/job_placement.hpp).
#pragma once

#include <string>
#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

enum class PlacementKind { Nodes, Pool, Auto };

// Where a job runs: `nodes` consecutive nodes of one pool from `first_node` (counted inside the pool).
// An Auto placement has its size from here and its first node from place_jobs().
struct JobPlacement {
  PlacementKind kind = PlacementKind::Auto;
  int pool = 0;
  int first_node = 0;
  int nodes = 0;
  Location location;  // of the job's `placement:`
};

struct JobSpec {
  std::string name;
  // The job as a scenario of its own: its cluster is its pool cut to its `placement.nodes` nodes.
  ScenarioSpec scenario;
  JobPlacement placement;
  Location location;  // of the job's entry in `jobs:`
};

struct JobsScenario {
  std::string name;
  std::string description;
  std::string file;
  ClusterSpec cluster;  // the whole shared cluster
  std::vector<JobSpec> jobs;
  std::vector<Diagnostic> warnings;
};

// Whether a scenario document holds `jobs:` (several jobs on one cluster) instead of one job.
bool holds_jobs(const DocNode& document);

// Loads a scenario of several jobs: each job's keys as in a one-job scenario (model, training, plan,
// search), its placement, and the shared `cluster:`. Every problem (a job's own, a placement past its
// pool, placements that overlap, a misspelled key with its nearest valid one) is reported at once in
// one InputError. Auto placements keep first_node 0 until place_jobs() packs them.
JobsScenario load_jobs_scenario(DocNode document, const std::vector<Override>& overrides = {},
                                const Catalog& catalog = Catalog::installed());
JobsScenario load_jobs_scenario(const std::string& path, const std::vector<Override>& overrides = {},
                                const Catalog& catalog = Catalog::installed());

// The cluster a job sees: its placement's pool alone, `nodes` nodes of it.
ClusterSpec job_cluster(const ClusterSpec& cluster, const JobPlacement& placement);

}  // namespace paratwin
