// Several jobs on one cluster planned together: their automatic placements packed, then each job's
// plan chosen (fixed or by the optimizer) for the nodes it was given.
#pragma once

#include <vector>

#include "plan/search/choose.hpp"
#include "plan/spec/jobs.hpp"
#include "plan/topology/job_placement.hpp"

namespace paratwin {

struct PlannedJobs {
  JobsScenario scenario;          // every placement complete
  std::vector<ChosenPlan> plans;  // per job
  std::vector<PlacementCost> costs;
};

// Throws InputError when a job does not fit beside the others, or naming the job whose plan cannot run
// (or for which the optimizer finds nothing that fits its nodes).
PlannedJobs plan_jobs(JobsScenario scenario, const SearchOptions& options);

}  // namespace paratwin
