// Packing of automatic job placements and the cost of each placement in fabric domains.
#include "plan/topology/job_placement.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "plan/spec/suggest.hpp"
#include "plan/topology/cluster_sites.hpp"

namespace paratwin {
namespace {

// The fabric domain of each node of a pool (its first GPU's NIC's domain).
std::vector<int> node_domains(const ClusterSpec& cluster, const ClusterSites& sites, int pool) {
  const PoolSpec& p = cluster.pools[size_t(pool)];
  std::vector<int> out;
  for (int n = 0; n < p.nodes; ++n)
    out.push_back(
        sites.fabric_domain(cluster, sites.site(sites.first_gpu_of_pool(pool) + n * p.gpus_per_node).nic));
  return out;
}

std::set<int> domains_of(const std::vector<int>& domain, int first, int count) {
  return std::set<int>(domain.begin() + first, domain.begin() + first + count);
}

std::string range(const JobPlacement& pl) {
  return "[" + std::to_string(pl.first_node) + ", " + std::to_string(pl.first_node + pl.nodes) + ")";
}

}  // namespace

int first_global_node(const ClusterSpec& cluster, const JobPlacement& placement) {
  int node = 0;
  for (int p = 0; p < placement.pool; ++p) node += cluster.pools[size_t(p)].nodes;
  return node + placement.first_node;
}

void place_jobs(JobsScenario& s) {
  const ClusterSites sites(s.cluster);
  std::vector<std::vector<int>> owner(s.cluster.pools.size());  // pool -> node -> job (-1 free)
  std::vector<std::vector<int>> domain(s.cluster.pools.size());
  for (size_t p = 0; p < s.cluster.pools.size(); ++p) {
    owner[p].assign(size_t(s.cluster.pools[p].nodes), -1);
    domain[p] = node_domains(s.cluster, sites, int(p));
  }
  auto take = [&](size_t job) {
    const JobPlacement& pl = s.jobs[job].placement;
    for (int n = pl.first_node; n < pl.first_node + pl.nodes; ++n)
      owner[size_t(pl.pool)][size_t(n)] = int(job);
  };
  std::vector<size_t> automatic;
  for (size_t j = 0; j < s.jobs.size(); ++j)
    if (s.jobs[j].placement.kind == PlacementKind::Auto)
      automatic.push_back(j);
    else
      take(j);
  std::stable_sort(automatic.begin(), automatic.end(),
                   [&](size_t a, size_t b) { return s.jobs[a].placement.nodes > s.jobs[b].placement.nodes; });
  for (size_t j : automatic) {
    JobPlacement& pl = s.jobs[j].placement;
    const auto& own = owner[size_t(pl.pool)];
    const auto& dom = domain[size_t(pl.pool)];
    int best = -1;
    std::pair<size_t, size_t> best_score;
    for (int first = 0; first + pl.nodes <= int(own.size()); ++first) {
      if (std::any_of(own.begin() + first, own.begin() + first + pl.nodes, [](int o) { return o >= 0; }))
        continue;
      const std::set<int> spans = domains_of(dom, first, pl.nodes);
      size_t shared = 0;
      for (size_t n = 0; n < own.size(); ++n)
        if (own[n] >= 0 && spans.count(dom[n])) ++shared;
      const std::pair<size_t, size_t> score{spans.size(), shared};
      if (best < 0 || score < best_score) best = first, best_score = score;
    }
    if (best < 0)
      throw InputError(pl.location,
                       "no " + std::to_string(pl.nodes) + " consecutive free nodes are left in pool '" +
                           s.cluster.pools[size_t(pl.pool)].name + "' for job '" + s.jobs[j].name +
                           "' beside the other jobs; shrink it, place it by hand or give the "
                           "cluster more nodes");
    pl.first_node = best;
    take(j);
  }
}

std::vector<PlacementCost> placement_costs(const JobsScenario& s) {
  const ClusterSites sites(s.cluster);
  std::vector<PlacementCost> out;
  for (const JobSpec& job : s.jobs) {
    const JobPlacement& pl = job.placement;
    const PoolSpec& pool = s.cluster.pools[size_t(pl.pool)];
    const std::vector<int> dom = node_domains(s.cluster, sites, pl.pool);
    PlacementCost c;
    c.oversubscribed = sites.oversubscribed(s.cluster);
    const std::set<int> mine = domains_of(dom, pl.first_node, pl.nodes);
    c.domains = int(mine.size());
    const int per_domain =
        std::max(1, full_bisection_gpus(pool, s.cluster) / std::max(1, pool.gpus_per_node));
    c.fewest_domains = s.cluster.network.topology == NetworkTopology::RailOptimized
                           ? c.domains
                           : (pl.nodes + per_domain - 1) / per_domain;
    for (const JobSpec& other : s.jobs) {
      if (&other == &job || other.placement.pool != pl.pool) continue;
      const std::set<int> theirs = domains_of(dom, other.placement.first_node, other.placement.nodes);
      if (std::any_of(theirs.begin(), theirs.end(), [&](int d) { return mine.count(d) > 0; }))
        c.sharing_with.push_back(other.name);
    }
    out.push_back(c);
  }
  return out;
}

std::string to_text(const JobsScenario& s, const std::vector<PlacementCost>& costs) {
  std::string out;
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const JobSpec& job = s.jobs[j];
    const PlacementCost& c = costs[j];
    out += "  " + job.name + ": nodes " + range(job.placement) + " of pool " +
           s.cluster.pools[size_t(job.placement.pool)].name +
           (job.placement.kind == PlacementKind::Auto ? " (packed)" : "");
    if (!c.oversubscribed) {
      out += "; full-bisection fabric: no link shared with other jobs\n";
      continue;
    }
    out += ", " + std::to_string(c.domains) + (c.domains == 1 ? " fabric domain" : " fabric domains") +
           " (fewest " + std::to_string(c.fewest_domains) + ")";
    if (c.sharing_with.empty())
      out += "; its domains' uplinks carry no other job";
    else
      out += "; shares its domains' oversubscribed uplinks with " + join(c.sharing_with);
    if (c.domains > c.fewest_domains) out += "; its DP traffic crosses more uplinks than it must";
    out += "\n";
  }
  return out;
}

}  // namespace paratwin
