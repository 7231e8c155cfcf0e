// The job's shape and the failure facts the closed form and the simulated horizon share.
#include "plan/reliability/job_shape.hpp"

#include <algorithm>
#include <cmath>

#include "plan/topology/cluster_sites.hpp"

namespace paratwin {

JobShape job_shape(const ScenarioSpec& scenario, int dp, int replica_gpus) {
  const PoolSpec& pool = scenario.cluster.pools.front();
  const ClusterSites sites(scenario.cluster);
  JobShape job;
  job.nodes = sites.nodes();
  job.gpus_per_node = pool.gpus_per_node;
  job.nics_per_node = pool.nic.count;
  const int boundary =
      scenario.cluster.network.gpus_per_leaf ? scenario.cluster.network.gpus_per_leaf : pool.gpus_per_node;
  job.switches = std::max(1, sites.gpus() / boundary);
  job.dp = dp;
  job.replica_gpus = replica_gpus;
  const TrainingSpec& tr = scenario.training;
  job.tokens_to_train = tr.tokens  ? *tr.tokens
                        : tr.steps ? double(*tr.steps) * double(tr.global_batch) * tr.seq_len
                                   : 0;
  return job;
}

JobShape job_shape(const ScenarioSpec& scenario, const Plan& plan, const Program& program) {
  JobShape job = job_shape(scenario, plan.dp, plan.tp * plan.pp * plan.cp);
  job.checkpoint_cost_s = checkpoint_cost_s(program, scenario.cluster);
  if (scenario.training.steps)
    job.tokens_to_train = double(*scenario.training.steps) * program.tokens_per_iteration;
  return job;
}

int component_count(Component c, const JobShape& job) {
  switch (c) {
    case Component::Gpu:
      return job.nodes * job.gpus_per_node;
    case Component::Host:
      return job.nodes;
    case Component::Nic:
    case Component::Link:
      return job.nodes * job.nics_per_node;
    case Component::Switch:
      return job.switches;
  }
  return 0;
}

int node_of(Component c, int index, const JobShape& job) {
  switch (c) {
    case Component::Gpu:
      return index / job.gpus_per_node;
    case Component::Host:
      return index;
    case Component::Nic:
    case Component::Link:
      return index / job.nics_per_node;
    case Component::Switch:
      return static_cast<int>(static_cast<long long>(index) * job.nodes / job.switches);
  }
  return 0;
}

double job_failure_rate_per_s(const FailureSpec& failures, const JobShape& job) {
  double rate = 0;
  for (const auto& [component, f] : failures.rates) rate += component_count(component, job) / f.mtbf.value();
  return rate;
}

double young_daly_interval_s(double mtbf_s, double checkpoint_cost_s) {
  return mtbf_s > 0 && checkpoint_cost_s > 0 ? std::sqrt(2 * mtbf_s * checkpoint_cost_s) : 0;
}

int runnable_replicas(const ElasticitySpec& el, const JobShape& job, int failed) {
  switch (el.policy) {
    case ElasticPolicy::Restart:
      return failed == 0 ? job.dp : 0;
    case ElasticPolicy::Spares:
      return failed <= el.spares / std::max(1, job.gpus_per_node) ? job.dp : 0;
    case ElasticPolicy::Shrink: {
      const long long healthy = static_cast<long long>(job.nodes - failed) * job.gpus_per_node;
      const int d = static_cast<int>(std::min<long long>(job.dp, healthy / job.replica_gpus));
      const int min_gpus = el.min_gpus ? *el.min_gpus : job.replica_gpus;
      return d * job.replica_gpus >= min_gpus ? d : 0;
    }
  }
  return 0;
}

double checkpoint_cost_s(const Program& program, const ClusterSpec& cluster) {
  // ZeRO shards over the dp x cp replicas: what is not sharded is held by each of them, and written
  // once (each writes its share).
  const Plan& plan = program.plan;
  const double replicas = double(plan.dp) * plan.cp;
  const double weights_share = plan.zero >= 3 ? 1 : 1 / replicas;
  const double optimizer_share = plan.zero >= 1 ? 1 : 1 / replicas;
  double total = 0, slowest = 0;
  for (const Role& role : program.roles) {
    const double mine = role.state.weights.value() * weights_share +
                        (role.state.optimizer.value() + role.host_state.value()) * optimizer_share;
    total += mine * role.instances;
    for (const PoolSpec& pool : cluster.pools)
      if (pool.name == role.pool) {
        const double nic =
            pool.nic.achievable.value_or(pool.nic.bandwidth).value() * pool.nic.count / pool.gpus_per_node;
        slowest = std::max(slowest, nic > 0 ? mine / nic : 0.0);
      }
  }
  const double storage = cluster.storage_bandwidth.value();
  return std::max(storage > 0 ? total / storage : 0.0, slowest);
}

}  // namespace paratwin
