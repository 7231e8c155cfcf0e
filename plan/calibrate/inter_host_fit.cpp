// Inter-host bandwidth and latency from the collectives that crossed hosts.
#include "plan/calibrate/inter_host_fit.hpp"

#include <algorithm>
#include <cmath>

#include "plan/calibrate/two_term_fit.hpp"

namespace paratwin {
namespace {

// The cost model's time of a timed collective with NIC figures (seconds per byte, latency).
double model_time(const TimedCollective& t, ClusterSpec& cluster, const std::string& pool_name,
                  double s_per_byte, double latency_s) {
  PoolSpec& pool = cluster.pool_named(pool_name);
  pool.nic.achievable = BytesPerSecond(1 / s_per_byte);
  pool.nic.latency = Seconds(latency_s);
  return cost::collective_time(t.kind, t.bytes, t.placement, pool, cluster).time.value() * t.count;
}

// Each collective across hosts as time ~ c + a x + b y, linear around (x, y) = (seconds per byte of one
// NIC, its latency).
std::vector<Row> rows_at(const std::vector<TimedCollective>& timed, std::vector<ClusterSpec>& clusters,
                         const std::string& pool, double x, double y) {
  std::vector<Row> rows;
  const double h = 1e-6, dy = std::max(y * h, 1e-12);
  for (const TimedCollective& t : timed) {
    ClusterSpec& cluster = clusters.at(t.cluster);
    const double t0 = model_time(t, cluster, pool, x, y);
    const double a = (model_time(t, cluster, pool, x * (1 + h), y) - t0) / (x * h);
    const double b = (model_time(t, cluster, pool, x, y + dy) - t0) / dy;
    rows.push_back({a, b, t.measured_s, t0 - a * x - b * y});
  }
  return rows;
}

}  // namespace

std::vector<TimedCollective> collectives_across_hosts(const std::vector<ProfiledRun>& runs) {
  std::vector<TimedCollective> timed;
  for (size_t r = 0; r < runs.size(); ++r) {
    const Role& role = runs[r].program.roles.front();
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const double measured = runs[r].profile.tasks[i].transfer_s;
      if (t.kind != TaskKind::Collective || t.placement.size <= t.placement.per_node || !(measured > 0))
        continue;
      timed.push_back({t.collective, t.bytes, t.placement, t.count, measured, r});
    }
  }
  return timed;
}

void fit_inter_host(const std::vector<TimedCollective>& timed, std::vector<ClusterSpec> clusters,
                    Calibration& cal) {
  PoolSpec& pool = cal.cluster.pool_named(cal.pool);
  const std::string field = "pools." + cal.pool + ".nic";
  // From a quarter of the NIC's figure: where the NIC is fast enough for another link to bound a
  // collective (a hierarchical one's NVLink phases), its time does not move with the NIC's figures, and
  // a fit linearized there would see nothing to fit.
  double x = 4 / pool.nic.achievable.value_or(pool.nic.bandwidth).value(), y = pool.nic.latency.value();
  TwoTermFit f;
  // The algorithm the model picks may change with the figures: fit again where it settles.
  for (int round = 0; round < 8; ++round) {
    f = fit_two_terms(rows_at(timed, clusters, cal.pool, x, y), y);
    if (!(f.x > 0)) break;
    const bool settled = std::fabs(f.x / x - 1) < 1e-6 && std::fabs(f.y - y) <= 1e-6 * std::max(y, 1e-9);
    x = f.x, y = f.y;
    if (settled) break;
  }
  const bool fitted = f.samples > 0 && f.x > 0;
  if (fitted) pool.nic.achievable = BytesPerSecond(1 / x);
  if (fitted && f.both) pool.nic.latency = Seconds(y);
  set_figure(cal, {field + ".achievable", "inter-host bandwidth",
                   fitted ? to_string(BytesPerSecond(1 / x)) + " per NIC"
                          : "not measured: kept (no collective crossed hosts)",
                   fitted, f.samples, f.rms});
  set_figure(cal,
             {field + ".latency", "inter-host latency",
              fitted && f.both ? to_string(Seconds(y))
              : fitted ? "kept: the collectives across hosts do not tell it from the bandwidth (one size)"
                       : "not measured: kept (no collective crossed hosts)",
              fitted && f.both, f.samples, f.rms});
}

}  // namespace paratwin
