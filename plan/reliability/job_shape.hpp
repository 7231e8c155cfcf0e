// The job as the failure model sees it, and the facts about it that both the closed-form goodput
// (expected_goodput.hpp, for the optimizer) and the simulated horizon (sim/reliability.hpp) use: which
// components fail and on which node, the job's failure rate, the Young/Daly interval, how many replicas
// an elastic policy runs with some nodes down, and what a checkpoint costs.
#pragma once

#include "plan/ir/plan.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

struct JobShape {
  int nodes = 1;  // of the job's cluster (all of them: nodes the plan leaves idle are its spares)
  int gpus_per_node = 1;
  int nics_per_node = 1;
  int switches = 1;      // failure domains for switch failures
  int dp = 1;            // data-parallel replicas of the full configuration
  int replica_gpus = 1;  // GPUs of one replica (tp x pp x cp): what a shrink loses at a time
  double checkpoint_cost_s = 0;
  // A checkpoint written behind the training (two phases): after its cost (the snapshot) the
  // training goes on, and the checkpoint counts only this much later, once it is on disk.
  double checkpoint_write_behind_s = 0;
  // Under the shrink policy, grow back as soon as a checkpoint is on disk and the repaired nodes
  // allow more replicas (a live run's supervisor does), instead of at the next failure's restart.
  bool regrow_at_checkpoint = false;
  double tokens_to_train = 0;  // 0: unknown
};

// The shape of a job running `dp` replicas of `replica_gpus` GPUs on the scenario's cluster (its first
// pool's nodes, NICs and leaf switches), without its checkpoint cost.
JobShape job_shape(const ScenarioSpec& scenario, int dp, int replica_gpus);
// The same for a plan, with the checkpoint cost of its Program.
JobShape job_shape(const ScenarioSpec& scenario, const Plan& plan, const Program& program);

// How many of the job's components of a kind can fail, and the node a failed one takes down.
int component_count(Component component, const JobShape& job);
int node_of(Component component, int index, const JobShape& job);

// Failures per second of the whole job from the per-component rates (0 without rates).
double job_failure_rate_per_s(const FailureSpec& failures, const JobShape& job);

// Young/Daly: sqrt(2 x MTBF x checkpoint cost); 0 when either is 0.
double young_daly_interval_s(double mtbf_s, double checkpoint_cost_s);

// Replicas the job can run with `failed_nodes` nodes down under its elastic policy (0: it cannot run):
// restart needs every node, spares as many down as the hot spares cover, shrink keeps the replicas the
// healthy GPUs hold as long as they reach min_gpus (default one replica).
int runnable_replicas(const ElasticitySpec& elasticity, const JobShape& job, int failed_nodes);

// Writing a checkpoint: the model's weights and optimizer states once (what ZeRO leaves replicated is
// written by the replicas in shares), at the storage bandwidth, and no faster than one rank pushes its
// share through its NIC share.
double checkpoint_cost_s(const Program& program, const ClusterSpec& cluster);

}  // namespace paratwin
