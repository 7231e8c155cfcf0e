// Least-squares fits of the cost model's rates to measured task times, and the calibrated cluster file.
#include "plan/calibrate/fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plan/analytic/evaluate.hpp"
#include "plan/calibrate/inter_host_fit.hpp"
#include "plan/calibrate/two_term_fit.hpp"
#include "plan/spec/suggest.hpp"
#include "plan/topology/rank_threads.hpp"
#include "plan/util/number_text.hpp"

namespace paratwin {
namespace {

std::string percent(double v) {
  return format_number("%.1f%%", 100 * v);
}

// (latency steps, byte factor) of a collective inside one node: time = steps x latency + factor x n / busbw
// (plan/cost/collectives.hpp's closed forms).
std::pair<double, double> coefficients(cost::CollectiveKind kind, cost::Algorithm algorithm, int p) {
  using cost::CollectiveKind;
  switch (kind) {
    case CollectiveKind::AllReduce:
      if (algorithm == cost::Algorithm::Tree) return {2 * std::ceil(std::log2(p)), 2};
      if (algorithm == cost::Algorithm::Sharp) return {2, 1};
      return {2.0 * (p - 1), 2.0 * (p - 1) / p};
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllToAll:
      return {p - 1.0, (p - 1.0) / p};
    case CollectiveKind::Broadcast:
      return {p - 1.0, 1};
  }
  return {0, 0};
}

// Applies the device and fabric figures of `from` to the same device and pool of `to`.
void copy_figures(const ClusterSpec& from, ClusterSpec& to, const std::string& device,
                  const std::string& pool) {
  to.devices.at(device) = from.devices.at(device);
  to.pool_named(pool).intra_node = from.pool_named(pool).intra_node;
  to.pool_named(pool).nic = from.pool_named(pool).nic;
}

// Every run must be of the calibrated pool and precision: one device's figures are fitted at a time.
void check_runs_agree(const std::vector<ProfiledRun>& runs, const std::string& pool_name,
                      Precision precision) {
  for (const ProfiledRun& run : runs) {
    const std::string& pool = run.program.roles.front().pool;
    if (pool != pool_name)
      throw InputError(Location{run.profile.path}, "this profile ran on pool " + pool + ", " +
                                                       runs.front().profile.path + " on pool " + pool_name +
                                                       "; calibrate one pool at a time");
    if (run.scenario.training.precision != precision)
      throw InputError(Location{run.profile.path},
                       "this profile trained in " +
                           enum_name(run.scenario.training.precision, kPrecisionNames) + ", " +
                           runs.front().profile.path + " in " + enum_name(precision, kPrecisionNames) +
                           "; calibrate one precision at a time");
  }
}

// Rows of every term, over every measured task of every run.
struct Rows {
  std::vector<Row> dense, attention, memory, scores, optimizer, collective;
};

// The memory-bound rest of the forward and backward passes is summed per micro-batch: the model's
// backward does twice the forward's traffic, a CPU's backward kernels do not, and only their sum shapes
// an iteration. The attention scores' kernels, where the profile timed them apart, are a row of their
// own: a head's scores stay in a CPU core's caches while activations stream from memory, so the two
// rates differ and the plans' mix of them differs with the sequence length.
Rows rows_of(const std::vector<ProfiledRun>& runs, const std::string& pool_name) {
  Rows rows;
  for (const ProfiledRun& run : runs) {
    const Role& role = run.program.roles.front();
    const PoolSpec& run_pool = run.scenario.cluster.pool_named(pool_name);
    const DeviceSpec& run_device = run.scenario.cluster.device_of(run_pool);
    const Precision precision = run.scenario.training.precision;
    // A rank of T threads is T cores of the cluster's device, each doing 1/T of the work: the figures
    // fitted are a core's (rank_threads.hpp); launch costs stay whole.
    const double cores = run.profile.threads;
    std::map<int, Row> per_microbatch, scores_per_microbatch;
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const ProfiledTask& m = run.profile.tasks[i];
      const cost::KernelCost& w = t.work;
      if (t.stream == StreamKind::Compute) {
        // The dense GEMMs' FLOPs as the device runs them (divided by their wave efficiency).
        rows.dense.push_back({cost::dense_gemm_seconds_at_full_efficiency(w, run_device, precision) *
                                  run_device.peak.at(precision).value() / cores,
                              0, m.gemm_s});
        rows.attention.push_back({w.attention_flops.value() / cores, 0, m.attention_s});
        const double rest = m.cpu_s - m.gemm_s - m.attention_s;
        if (w.optimizer_bytes.value() > 0) {
          rows.optimizer.push_back({w.optimizer_bytes.value() / cores, double(w.launches), rest});
        } else {
          // The norms' and gated activations' bytes at the memory-bound kernels' rate: they keep their
          // ratios to it.
          const EfficiencySpec& e = run_device.efficiency;
          double bytes = memory_equivalent_bytes(w, e), time = rest;
          if (w.scores_bytes.value() > 0 && m.scores_s > 0) {
            Row& s = scores_per_microbatch[t.microbatch];
            s.a += w.scores_bytes.value() / cores, s.time += m.scores_s;
            bytes -= w.scores_bytes.value() * e.memory / e.memory_share(&EfficiencySpec::scores),
                time -= m.scores_s;
          }
          Row& r = per_microbatch[t.microbatch];
          r.a += bytes / cores, r.b += w.launches, r.time += time;
        }
      } else if (t.kind == TaskKind::Collective && t.placement.size == t.placement.per_node &&
                 m.transfer_s > 0) {
        const auto chosen =
            cost::collective_time(t.collective, t.bytes, t.placement, run_pool, run.scenario.cluster);
        const auto [steps, factor] = coefficients(t.collective, chosen.algorithm, t.placement.size);
        rows.collective.push_back({factor * t.bytes.value() * t.count, steps * t.count, m.transfer_s});
      }
    }
    for (const auto& [microbatch, row] : per_microbatch) rows.memory.push_back(row);
    for (const auto& [microbatch, row] : scores_per_microbatch) rows.scores.push_back(row);
  }
  return rows;
}

void add_figure(Calibration& cal, const std::string& field, const std::string& what, const TwoTermFit& f,
                const std::string& measured) {
  cal.figures.push_back(
      {field, what, f.samples ? measured : "not measured: kept", f.samples > 0 && f.x > 0, f.samples, f.rms});
}

// The dense and attention GEMM rates (the peak raised when the device beats its datasheet).
void fit_gemms(const Rows& rows, Precision precision, DeviceSpec& device, const std::string& dp,
               Calibration& cal) {
  const FlopsPerSecond old_peak = device.peak.at(precision);
  const TwoTermFit d = fit_two_terms(rows.dense, 0), a = fit_two_terms(rows.attention, 0);
  const double dense_rate = d.x > 0 ? 1 / d.x : 0, attention_rate = a.x > 0 ? 1 / a.x : 0;
  if (std::max(dense_rate, attention_rate) > old_peak.value()) {
    device.peak[precision] = FlopsPerSecond(std::max(dense_rate, attention_rate));
    cal.notes.push_back("peak " + enum_name(precision, kPrecisionNames) + " raised from " +
                        to_string(old_peak) + " to the rate measured, " + to_string(device.peak[precision]) +
                        ": the datasheet figure was below what this device does");
  }
  const double peak = device.peak.at(precision).value();
  if (dense_rate > 0) device.efficiency.gemm = std::max(0.01, dense_rate / peak);
  if (attention_rate > 0) device.efficiency.attention = std::max(0.001, attention_rate / peak);
  add_figure(cal, dp + ".efficiency.gemm", "dense GEMMs", d, to_string(FlopsPerSecond(dense_rate)));
  add_figure(cal, dp + ".efficiency.attention", "attention GEMMs", a,
             to_string(FlopsPerSecond(attention_rate)));
}

// Elementwise bandwidth and the launch cost together (they are told apart only when tasks mix them in
// different proportions), then the attention scores' kernels and the optimizer with that launch cost
// (the scores' launches are counted with the rest's).
void fit_memory(const Rows& rows, DeviceSpec& device, const std::string& dp, Calibration& cal) {
  const TwoTermFit m = fit_two_terms(rows.memory, device.efficiency.kernel_launch.value());
  const TwoTermFit s = fit_two_terms(rows.scores, m.y, /*fit_y=*/false);
  const TwoTermFit o = fit_two_terms(rows.optimizer, m.y, /*fit_y=*/false);
  const double memory_bw = m.x > 0 ? 1 / m.x : 0, scores_bw = s.x > 0 ? 1 / s.x : 0,
               optimizer_bw = o.x > 0 ? 1 / o.x : 0;
  const double fastest = std::max({memory_bw, scores_bw, optimizer_bw});
  if (fastest > device.memory_bandwidth.value()) {
    cal.notes.push_back("memory_bandwidth raised from " + to_string(device.memory_bandwidth) +
                        " to the bandwidth measured, " + to_string(BytesPerSecond(fastest)));
    device.memory_bandwidth = BytesPerSecond(fastest);
  }
  const auto share = [&](double bw, double floor) {
    return std::max(floor, bw / device.memory_bandwidth.value());
  };
  if (memory_bw > 0) {
    const double memory = share(memory_bw, 0.01);
    // Kinds not measured here keep their ratios to the memory-bound kernels' rate.
    for (const auto& [key, kind] : kMemoryShares)
      if (device.efficiency.*kind) *(device.efficiency.*kind) *= memory / device.efficiency.memory;
    device.efficiency.memory = memory;
  }
  if (scores_bw > 0) device.efficiency.scores = share(scores_bw, 0.01);
  if (optimizer_bw > 0) device.efficiency.optimizer = share(optimizer_bw, 0.001);
  if (m.both) device.efficiency.kernel_launch = Seconds(m.y);
  add_figure(cal, dp + ".efficiency.memory", "memory-bound kernels", m, to_string(BytesPerSecond(memory_bw)));
  if (s.samples)
    add_figure(cal, dp + ".efficiency.scores", "attention scores' kernels", s,
               to_string(BytesPerSecond(scores_bw)));
  add_figure(cal, dp + ".efficiency.optimizer", "optimizer step", o, to_string(BytesPerSecond(optimizer_bw)));
  cal.figures.push_back({dp + ".efficiency.kernel_launch", "kernel launch",
                         m.both ? to_string(Seconds(m.y))
                                : "kept: launches and memory traffic are in one proportion in every "
                                  "micro-batch (profile two micro-batch sizes to fit it)",
                         m.both, m.samples, m.rms});
}

// The node's collective bus bandwidth and step latency, from the collectives inside one node.
void fit_collectives(const Rows& rows, PoolSpec& pool, const std::string& pp, Calibration& cal) {
  const TwoTermFit c = fit_two_terms(rows.collective, pool.intra_node.latency.value());
  if (c.x > 0) pool.intra_node.allreduce_busbw = BytesPerSecond(1 / c.x);
  if (c.both) pool.intra_node.latency = Seconds(c.y);
  add_figure(cal, pp + ".intra_node.allreduce_busbw", "collectives' bus bandwidth", c,
             to_string(BytesPerSecond(c.x > 0 ? 1 / c.x : 0)));
  cal.figures.push_back(
      {pp + ".intra_node.latency", "collectives' step latency",
       c.both ? to_string(Seconds(c.y)) : "kept: every collective measured had the same size", c.both,
       c.samples, c.rms});
}

// Each run's cluster as sized for it, with the figures calibrated so far.
ClusterSpec calibrated_for(const ProfiledRun& run, const Calibration& cal) {
  ClusterSpec sized = run.scenario.cluster;
  copy_figures(cal.cluster, sized, cal.device, cal.pool);
  scale_cpu_devices(sized, run.profile.threads);
  return sized;
}

// Every measured task against the calibrated model, on the cluster each run had.
void compare_tasks(const std::vector<ProfiledRun>& runs, Precision precision, Calibration& cal) {
  for (const ProfiledRun& run : runs) {
    const ClusterSpec sized = calibrated_for(run, cal);
    const Role& role = run.program.roles.front();
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& t = role.tasks[i];
      const ProfiledTask& measured = run.profile.tasks[i];
      const double time = t.stream == StreamKind::Compute ? measured.cpu_s : measured.transfer_s;
      if (!(time > 0)) continue;
      cal.tasks.push_back(
          {run.profile.path, t.name, time, task_duration_s(t, sized.pool_named(cal.pool), sized, precision)});
    }
  }
}

}  // namespace

Calibration start_calibration(const ClusterSpec& cluster, const std::string& pool) {
  std::vector<std::string> names;
  for (const PoolSpec& p : cluster.pools) names.push_back(p.name);
  if (pool.empty() && names.size() != 1)
    throw InputError(Location{"--pool"}, "cluster " + cluster.name + " has pools " + join(names) +
                                             ": say which one the measurements ran on");
  const std::string name = pool.empty() ? names.front() : pool;
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw InputError(Location{"--pool"}, "cluster " + cluster.name + " has no pool '" + name +
                                             "': its pools are " + join(names) + did_you_mean(name, names));
  Calibration cal;
  cal.cluster = cluster;
  cal.pool = name;
  cal.device = cluster.pool_named(name).device;
  return cal;
}

Calibration calibrate(const std::vector<ProfiledRun>& runs, const ClusterSpec& cluster) {
  if (runs.empty()) throw std::logic_error("calibrate without runs");
  Calibration cal = start_calibration(cluster, runs.front().program.roles.front().pool);
  const Precision precision = runs.front().scenario.training.precision;
  check_runs_agree(runs, cal.pool, precision);
  const Rows rows = rows_of(runs, cal.pool);
  if (rows.memory.empty() && rows.optimizer.empty())
    throw InputError(Location{runs.front().profile.path}, "the profiles measured no compute task");
  DeviceSpec& device = cal.cluster.devices.at(cal.device);
  const std::string dp = "devices." + cal.device;
  fit_gemms(rows, precision, device, dp, cal);
  fit_memory(rows, device, dp, cal);
  fit_collectives(rows, cal.cluster.pool_named(cal.pool), "pools." + cal.pool, cal);
  std::vector<ClusterSpec> run_clusters;
  for (const ProfiledRun& run : runs) run_clusters.push_back(calibrated_for(run, cal));
  fit_inter_host(collectives_across_hosts(runs), std::move(run_clusters), cal);
  compare_tasks(runs, precision, cal);
  cal.variability = measure_kernel_variability(runs);
  // How much the ranks differ throughout is the device's speed_cv: the calibrated twin's jobs wait for
  // their slowest rank as the measured ones did (plan/cost/slowest_gpu.hpp).
  if (cal.variability.ranks >= 2) {
    device.speed_cv = std::min(kMostSpeedCv, cal.variability.rank_cv);
    if (cal.variability.rank_cv > kMostSpeedCv)
      cal.notes.push_back("the ranks' spread " + percent(cal.variability.rank_cv) + " is kept at " +
                          percent(kMostSpeedCv) +
                          ", the most speed_cv takes: were other processes on their cores?");
    char measured[96];
    std::snprintf(measured, sizeof measured, "%.1f%% between %d ranks' mean steps", 100 * device.speed_cv,
                  cal.variability.ranks);
    set_figure(cal, {dp + ".speed_cv", "speed spread", measured, true, cal.variability.ranks, -1});
  }
  return cal;
}

void set_figure(Calibration& cal, FittedFigure figure) {
  std::erase_if(cal.figures, [&](const FittedFigure& f) { return f.field == figure.field; });
  cal.figures.push_back(std::move(figure));
}

std::string to_text(const FittedFigure& f) {
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %s", f.what.c_str(), f.measured.c_str());
  std::string text = line;
  if (f.fitted)
    text += "  (" + std::to_string(f.samples) + " samples" +
            (f.rms_residual >= 0 ? ", rms residual " + percent(f.rms_residual) : std::string()) + ")";
  return text;
}

std::string calibrated_cluster_yaml(const Calibration& cal, const std::vector<ProfiledRun>& runs,
                                    const std::string& cluster_argument, const std::string& timestamp) {
  std::string h =
      "# Calibrated by `paratwin calibrate` on " + timestamp + " from " + cluster_argument + " and:\n";
  for (const ProfiledRun& run : runs) {
    const Plan& p = run.program.plan;
    h += "#   " + run.profile.path + ": " + run.profile.scenario + " (" + run.profile.model + "), " +
         std::to_string(run.profile.ranks) + " rank(s), micro-batch " + std::to_string(p.micro_batch) +
         " x " + std::to_string(p.num_microbatches) + ", sequence " +
         std::to_string(run.scenario.training.seq_len) + ", " + std::to_string(run.profile.measured_steps) +
         " steps measured\n";
  }
  for (const std::string& input : cal.inputs) h += "#   " + input + "\n";
  h += "# Fitted on device " + cal.device + " and pool " + cal.pool +
       (runs.empty() ? std::string(":\n")
                     : " (profiles: medians over steps and ranks; compute as thread CPU time, so load from "
                       "other processes stays out):\n");
  for (const FittedFigure& f : cal.figures) h += "#   " + to_text(f) + "\n";
  for (const std::string& n : cal.notes) h += "#   note: " + n + "\n";
  if (!runs.empty()) {
    h += "# Kernel-time variability (calibrate --variability FILE writes it for --set variability=FILE): " +
         to_text(cal.variability) + "\n";
    h += "# Each measured task against the calibrated model (compute: CPU time; collectives: the "
         "transfer):\n";
  }
  std::string profile;
  for (const TaskResidual& t : cal.tasks) {
    if (runs.size() > 1 && t.profile != profile) h += "#   " + (profile = t.profile) + ":\n";
    char line[256];
    std::snprintf(line, sizeof line, "#   %-26s %9.3f ms measured %9.3f ms model %+7.1f%%\n", t.task.c_str(),
                  t.measured_s * 1e3, t.predicted_s * 1e3, 100 * (t.predicted_s / t.measured_s - 1));
    h += line;
  }
  std::map<std::string, std::string> comments;
  for (const FittedFigure& f : cal.figures)
    if (f.fitted) comments[f.field] = "calibrated: " + f.what + " " + f.measured;
  return h + to_yaml(cal.cluster, comments);
}

}  // namespace paratwin
