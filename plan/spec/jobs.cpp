// Scenarios of several jobs: the shared cluster, each job's own scenario, its placement and the checks
// that placements fit their pools and do not overlap.
#include "plan/spec/jobs.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "plan/spec/checks.hpp"

namespace paratwin {
namespace {

// The keys a job's entry may hold besides `placement`: those of a one-job scenario that describe the
// job itself (the cluster is shared; failures, sweeps and goals are not per job here).
const std::vector<std::string> kJobKeys = {"name", "description", "model", "training", "plan", "search"};

std::string node_range(int first, int count) {
  return "[" + std::to_string(first) + ", " + std::to_string(first + count) + ")";
}

bool is_auto_scalar(const DocNode& n) {
  return n.is_scalar() && !n.quoted && n.scalar == "auto";
}

// Nodes an `auto` placement without a count needs: the fixed plan's GPUs in whole nodes.
std::optional<int> nodes_of_fixed_plan(const ScenarioSpec& job, const PoolSpec& pool, const Location& at,
                                       const std::string& path, Diagnostics& diag) {
  const PlanRequest& p = job.plan;
  if (!p.dp || !p.tp || !p.pp) {
    diag.error(at, path +
                       ": auto takes the job's size from its plan's degrees (dp x tp x pp x cp); give "
                       "them, or the size: placement: {nodes: N}");
    return std::nullopt;
  }
  const long long gpus = 1LL * *p.dp * *p.tp * *p.pp * p.cp.value_or(1);
  if (gpus % pool.gpus_per_node != 0) {
    diag.error(at, path + ": the plan's " + std::to_string(gpus) + " GPUs are not whole " +
                       std::to_string(pool.gpus_per_node) + "-GPU nodes of pool '" + pool.name +
                       "'; jobs take whole nodes");
    return std::nullopt;
  }
  return static_cast<int>(gpus / pool.gpus_per_node);
}

// Reads `placement:` (absent: auto). Sizes from the plan are filled in by the caller.
JobPlacement parse_placement(const DocNode* node, const Location& job_at, const std::string& path,
                             const ClusterSpec& cluster, Diagnostics& diag, bool& sized) {
  JobPlacement pl;
  pl.location = node ? node->location : job_at;
  sized = false;
  std::vector<std::string> pools;
  for (const auto& p : cluster.pools) pools.push_back(p.name);
  if (!node || is_auto_scalar(*node)) {
    if (pools.size() > 1)
      diag.error(pl.location, path + ": the cluster has " + std::to_string(pools.size()) + " pools (" +
                                  join(pools) + "); say which: placement: {pool: " + pools.front() +
                                  ", nodes: N}");
    return pl;
  }
  if (node->is_scalar()) {
    read_choice(*node, path, {"auto"}, diag);  // the error, with the nearest spelling
    return pl;
  }
  MapReader r(*node, path, diag);
  bool pool_given = false;
  const DocNode* pool = r.get("pool");
  if (pool) {
    if (auto name = read_choice(*pool, r.field("pool"), pools, diag)) {
      pl.pool = static_cast<int>(std::find(pools.begin(), pools.end(), *name) - pools.begin());
      pool_given = true;
    }
  } else if (pools.size() > 1 && r.is_mapping()) {
    diag.error(pl.location, path + ": the cluster has " + std::to_string(pools.size()) + " pools (" +
                                join(pools) + "); say which with " + r.field("pool"));
  }
  const DocNode* nodes = r.get("nodes");
  r.finish();
  if (!r.is_mapping()) return pl;
  const int pool_nodes = cluster.pools.empty() ? 0 : cluster.pools[size_t(pl.pool)].nodes;
  if (!nodes) {
    const bool misspelled = std::any_of(node->entries.begin(), node->entries.end(), [](const DocEntry& e) {
      return e.key != "pool" && e.key != "nodes";
    });
    if (misspelled || (pool && !pool_given)) return pl;  // reported above: an unknown key or pool
    if (!pool_given) {
      diag.error(pl.location, path +
                                  " needs nodes (a range [first, end) or a count packed automatically) "
                                  "or a pool, e.g. {nodes: [0, 4]}, {nodes: 4} or {pool: NAME}");
      return pl;
    }
    pl.kind = PlacementKind::Pool;
    pl.nodes = pool_nodes;
    sized = true;
    return pl;
  }
  if (nodes->is_sequence()) {
    if (nodes->items.size() != 2) {
      diag.error(nodes->location,
                 "expected [first, end) for " + r.field("nodes") + ", e.g. [0, 4], got " + describe(*nodes));
      return pl;
    }
    auto first = read_int(nodes->items[0], r.field("nodes") + "[0]", diag, 0, 1 << 20);
    auto end = read_int(nodes->items[1], r.field("nodes") + "[1]", diag, 1, 1 << 20);
    if (!first || !end) return pl;
    if (*end <= *first) {
      diag.error(nodes->location, r.field("nodes") + " = " + node_range(int(*first), int(*end - *first)) +
                                      " is empty; expected [first, end) with end > first");
      return pl;
    }
    pl.kind = PlacementKind::Nodes;
    pl.first_node = static_cast<int>(*first);
    pl.nodes = static_cast<int>(*end - *first);
    sized = true;
    return pl;
  }
  if (auto count = read_int(*nodes, r.field("nodes"), diag, 1, 1 << 20)) {
    pl.nodes = static_cast<int>(*count);
    sized = true;
  }
  return pl;
}

// Placements past their pool's end, placements that overlap, and pools asked for more nodes than they
// have (auto placements included: they must fit beside the others).
void check_placements(const JobsScenario& s, Diagnostics& diag) {
  std::map<int, int> asked;  // pool -> nodes the jobs take
  for (size_t i = 0; i < s.jobs.size(); ++i) {
    const JobSpec& job = s.jobs[i];
    const JobPlacement& pl = job.placement;
    const PoolSpec& pool = s.cluster.pools[size_t(pl.pool)];
    asked[pl.pool] += pl.nodes;
    const std::string path = "jobs[" + std::to_string(i) + "].placement";
    if (pl.kind != PlacementKind::Auto && pl.first_node + pl.nodes > pool.nodes)
      diag.error(pl.location, path + " " + node_range(pl.first_node, pl.nodes) + " (job '" + job.name +
                                  "') passes the end of pool '" + pool.name + "', which has " +
                                  std::to_string(pool.nodes) + " nodes [0, " + std::to_string(pool.nodes) +
                                  ")");
    else if (pl.kind == PlacementKind::Auto && pl.nodes > pool.nodes)
      diag.error(pl.location, path + ": job '" + job.name + "' needs " + std::to_string(pl.nodes) +
                                  " nodes; pool '" + pool.name + "' has " + std::to_string(pool.nodes));
    if (pl.kind == PlacementKind::Auto) continue;
    for (size_t k = 0; k < i; ++k) {
      const JobPlacement& other = s.jobs[k].placement;
      if (other.kind == PlacementKind::Auto || other.pool != pl.pool) continue;
      const int lo = std::max(pl.first_node, other.first_node);
      const int hi = std::min(pl.first_node + pl.nodes, other.first_node + other.nodes);
      if (lo < hi)
        diag.error(pl.location, path + " " + node_range(pl.first_node, pl.nodes) + " (job '" + job.name +
                                    "') overlaps job '" + s.jobs[k].name + "' on " +
                                    node_range(other.first_node, other.nodes) + " of pool '" + pool.name +
                                    "' (nodes " + node_range(lo, hi - lo) + " are in both)");
    }
  }
  if (diag.has_errors()) return;
  for (const auto& [p, nodes] : asked) {
    const PoolSpec& pool = s.cluster.pools[size_t(p)];
    if (nodes > pool.nodes)
      diag.error(s.jobs.back().placement.location,
                 "the jobs take " + std::to_string(nodes) + " nodes of pool '" + pool.name + "', which has " +
                     std::to_string(pool.nodes) + "; shrink a job or give the cluster more nodes");
  }
}

// One job's entry: its own scenario on the shared cluster, then cut to its placement and checked.
JobSpec parse_job(const DocNode& item, size_t index, const DocNode& cluster_node, const ClusterSpec& cluster,
                  const Catalog& catalog, Diagnostics& diag) {
  JobSpec job;
  job.location = item.location;
  const std::string path = "jobs[" + std::to_string(index) + "]";
  job.name = "job" + std::to_string(index);
  MapReader r(item, path, diag);
  r.read("name", job.name);
  for (const std::string& key : kJobKeys) r.get(key);
  const DocNode* placement = r.get("placement");
  r.finish();
  if (!r.is_mapping()) return job;

  DocNode doc = DocNode::mapping_node(item.location);
  for (const DocEntry& e : item.entries)
    if (std::find(kJobKeys.begin(), kJobKeys.end(), e.key) != kJobKeys.end())
      doc.set(e.key, e.value.front(), e.key_location);
  if (!doc.find("name")) doc.set("name", DocNode::scalar_node(job.name, item.location), item.location);
  doc.set("cluster", cluster_node, cluster_node.location);

  Diagnostics own;
  job.scenario = parse_scenario_document(std::move(doc), catalog, own, /*run_checks=*/false);
  bool sized = false;
  job.placement = parse_placement(placement, item.location, path + ".placement", cluster, own, sized);
  if (!own.has_errors() && !sized)
    if (auto nodes = nodes_of_fixed_plan(job.scenario, cluster.pools[size_t(job.placement.pool)],
                                         job.placement.location, path + ".placement", own))
      job.placement.nodes = *nodes;
  if (!own.has_errors()) {
    job.scenario.cluster = job_cluster(cluster, job.placement);
    check_scenario(job.scenario, own);
  }
  for (Diagnostic d : own.all()) {
    // A job is sized by its placement, not by the shared cluster's size.
    if (const size_t at = d.message.find("set cluster.nodes="); at != std::string::npos) {
      const size_t end = std::min(d.message.size(), d.message.find_first_not_of("0123456789", at + 18));
      d.message.replace(at, end - at,
                        "give the job placement: {nodes: " + d.message.substr(at + 18, end - at - 18) + "}");
    }
    if (d.severity == Severity::Error)
      diag.error(d.where, "job '" + job.name + "': " + d.message);
    else
      diag.warning(d.where, "job '" + job.name + "': " + d.message);
  }
  return job;
}

}  // namespace

bool holds_jobs(const DocNode& document) {
  return document.is_mapping() && document.find("jobs") != nullptr;
}

ClusterSpec job_cluster(const ClusterSpec& cluster, const JobPlacement& placement) {
  ClusterSpec c = cluster;
  c.pools = {cluster.pools.at(size_t(placement.pool))};
  c.pools.front().nodes = placement.nodes;
  return c;
}

JobsScenario load_jobs_scenario(DocNode document, const std::vector<Override>& overrides,
                                const Catalog& catalog) {
  for (const auto& o : overrides) apply_override(document, o);
  Diagnostics diag;
  JobsScenario s;
  s.file = document.location.file;
  MapReader r(document, "", diag);
  r.read("name", s.name);
  r.read("description", s.description);
  const DocNode* cluster = r.require("cluster");
  const DocNode* jobs = r.require("jobs");
  r.finish();
  if (cluster)
    if (auto resolved = resolve_reference(*cluster, CatalogKind::Topology, catalog, diag))
      s.cluster = parse_cluster(*resolved, "cluster", diag);
  if (jobs && (!jobs->is_sequence() || jobs->items.empty()))
    diag.error(jobs->location, "expected a non-empty list of jobs for jobs, got " + describe(*jobs));
  if (diag.has_errors() || s.cluster.pools.empty()) diag.throw_if_errors();

  std::set<std::string> names;
  for (size_t i = 0; i < jobs->items.size(); ++i) {
    JobSpec job = parse_job(jobs->items[i], i, *cluster, s.cluster, catalog, diag);
    if (!names.insert(job.name).second)
      diag.error(job.location, "jobs[" + std::to_string(i) + "]: a second job named '" + job.name +
                                   "'; each job needs a name of its own");
    s.jobs.push_back(std::move(job));
  }
  if (!diag.has_errors()) check_placements(s, diag);
  diag.throw_if_errors();
  s.warnings = diag.warnings();
  return s;
}

JobsScenario load_jobs_scenario(const std::string& path, const std::vector<Override>& overrides,
                                const Catalog& catalog) {
  return load_jobs_scenario(load_yaml_file(path), overrides, catalog);
}

}  // namespace paratwin
