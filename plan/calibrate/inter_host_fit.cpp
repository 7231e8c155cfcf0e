// Inter-host bandwidth and latency from the collectives that crossed hosts.
#include "plan/calibrate/inter_host_fit.hpp"

#include <cmath>

#include "plan/calibrate/two_term_fit.hpp"
#include "plan/cost/collectives.hpp"

namespace paratwin {
namespace {

PoolSpec& pool_named(ClusterSpec& c, const std::string& name) {
  for (PoolSpec& p : c.pools)
    if (p.name == name) return p;
  throw std::logic_error("no pool " + name);
}

bool crosses_hosts(const Task& t) {
  return t.kind == TaskKind::Collective && t.placement.size > t.placement.per_node;
}

// The cost model's time of a measured collective with NIC figures (seconds per byte, latency).
double model_time(const Task& t, ClusterSpec& cluster, const std::string& pool_name, double s_per_byte,
                  double latency_s) {
  PoolSpec& pool = pool_named(cluster, pool_name);
  pool.nic.achievable = BytesPerSecond(1 / s_per_byte);
  pool.nic.latency = Seconds(latency_s);
  return cost::collective_time(t.collective, t.bytes, t.placement, pool, cluster).time.value() * t.count;
}

// Each collective across hosts as time ~ c + a x + b y, linear around (x, y) = (seconds per byte of one
// NIC, its latency).
std::vector<Row> rows_at(const std::vector<ProfiledRun>& runs, std::vector<ClusterSpec>& clusters,
                         const std::string& pool, double x, double y) {
  std::vector<Row> rows;
  const double h = 1e-6, dy = std::max(y * h, 1e-12);
  for (size_t r = 0; r < runs.size(); ++r) {
    const Role& role = runs[r].program.roles.front();
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const double measured = runs[r].profile.tasks[i].transfer_s;
      if (!crosses_hosts(t) || !(measured > 0)) continue;
      const double t0 = model_time(t, clusters[r], pool, x, y);
      const double a = (model_time(t, clusters[r], pool, x * (1 + h), y) - t0) / (x * h);
      const double b = (model_time(t, clusters[r], pool, x, y + dy) - t0) / dy;
      rows.push_back({a, b, measured, t0 - a * x - b * y});
    }
  }
  return rows;
}

}  // namespace

void fit_inter_host(const std::vector<ProfiledRun>& runs, std::vector<ClusterSpec> run_clusters,
                    Calibration& cal) {
  PoolSpec& pool = pool_named(cal.cluster, cal.pool);
  const std::string field = "pools." + cal.pool + ".nic";
  double x = 1 / pool.nic.achievable.value_or(pool.nic.bandwidth).value(), y = pool.nic.latency.value();
  TwoTermFit f;
  // The algorithm the model picks may change with the figures: fit again where it settles.
  for (int round = 0; round < 8; ++round) {
    f = fit_two_terms(rows_at(runs, run_clusters, cal.pool, x, y), y);
    if (!(f.x > 0)) break;
    const bool settled = std::fabs(f.x / x - 1) < 1e-6 && std::fabs(f.y - y) <= 1e-6 * std::max(y, 1e-9);
    x = f.x, y = f.y;
    if (settled) break;
  }
  const bool fitted = f.samples > 0 && f.x > 0;
  if (fitted) pool.nic.achievable = BytesPerSecond(1 / x);
  if (fitted && f.both) pool.nic.latency = Seconds(y);
  cal.figures.push_back({field + ".achievable", "inter-host bandwidth",
                         fitted ? to_string(BytesPerSecond(1 / x)) + " per NIC"
                                : "not measured: kept (no collective crossed hosts)",
                         fitted, f.samples, f.rms});
  cal.figures.push_back(
      {field + ".latency", "inter-host latency",
       fitted && f.both ? to_string(Seconds(y))
       : fitted         ? "kept: the collectives across hosts do not tell it from the bandwidth (one size)"
                        : "not measured: kept (no collective crossed hosts)",
       fitted && f.both, f.samples, f.rms});
}

}  // namespace paratwin
