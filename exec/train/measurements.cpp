// Gathering timings, and the profile, trace and report built from them.
#include "exec/train/measurements.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <utility>

#include "exec/threads.hpp"
#include "plan/calibrate/profile.hpp"
#include "plan/report/report.hpp"

namespace paratwin::exec {

namespace {

// Each task's timings besides its start and end: the field of its span, and where RunTimings keeps it.
constexpr std::pair<double TaskSpan::*, std::vector<double> RunTimings::*> kSpanFields[] = {
    {&TaskSpan::wait_s, &RunTimings::wait_s},
    {&TaskSpan::cpu_s, &RunTimings::cpu_s},
    {&TaskSpan::gemm_s, &RunTimings::gemm_s},
    {&TaskSpan::attention_s, &RunTimings::attention_s},
    {&TaskSpan::scores_s, &RunTimings::scores_s}};

// The kernels a compute task's profile entry splits its CPU time into, by their key.
constexpr std::pair<const char*, std::vector<double> RunTimings::*> kTimedKernels[] = {
    {"gemm_s", &RunTimings::gemm_s},
    {"attention_s", &RunTimings::attention_s},
    {"scores_s", &RunTimings::scores_s}};

}  // namespace

RunTimings gather_timings(Communicator& comm, const Role& role, const RunResult& result) {
  const int tasks = int(role.tasks.size()), steps = int(result.spans.size());
  std::vector<double> start, end;
  std::array<std::vector<double>, std::size(kSpanFields)> fields;
  for (int s = 0; s < steps; ++s)
    for (int t = 0; t < tasks; ++t) {
      const TaskSpan& span = result.spans[s][t];
      start.push_back(result.step_start_s[s] + span.start_s);
      end.push_back(result.step_start_s[s] + span.end_s);
      for (size_t f = 0; f < fields.size(); ++f) fields[f].push_back(span.*kSpanFields[f].first);
    }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const std::vector<double> rss{double(usage.ru_maxrss) * 1024.0};  // Linux reports KiB
  RunTimings out;
  out.start_s = comm.gather(start, 0);
  out.end_s = comm.gather(end, 0);
  for (size_t f = 0; f < fields.size(); ++f) out.*kSpanFields[f].second = comm.gather(fields[f], 0);
  out.step_cpu_s = comm.gather(result.step_cpu_s, 0);
  out.peak_rss_bytes = comm.gather(rss, 0);
  const std::vector<double> routed = comm.gather(result.routed_tokens, 0);
  const size_t cells = result.routed_tokens.size();
  out.routed_tokens.assign(cells, 0.0);
  for (size_t i = 0; cells > 0 && i < routed.size(); ++i) out.routed_tokens[i % cells] += routed[i];
  if (comm.rank() == 0) {
    out.ranks = comm.size();
    out.steps = steps;
    out.tasks = tasks;
  }
  return out;
}

namespace {

int first_measured_step(const RunTimings& t) {
  return t.steps > 1 ? 1 : 0;
}

// The q-quantile (0.5: the median) by the nearest rank.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto at = v.begin() + std::ptrdiff_t(q * double(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), at, v.end());
  return *at;
}

double median(std::vector<double> v) {
  return quantile(std::move(v), 0.5);
}

// Each rank's mean of a per-rank, per-step figure `at(rank, step)` over the measured steps.
template <typename At>
std::vector<double> rank_means(const RunTimings& t, At at) {
  const int first = first_measured_step(t), steps = t.steps - first;
  std::vector<double> means(size_t(t.ranks), 0.0);
  for (int r = 0; r < t.ranks; ++r)
    for (int s = first; s < t.steps; ++s) means[size_t(r)] += at(r, s) / steps;
  return means;
}

// The step-to-step coefficient of variation of a per-rank, per-step figure: each rank's values against
// that rank's mean (a rank persistently slower is no step-to-step variation), pooled over the ranks; 0
// with fewer than two measured steps.
template <typename At>
double step_to_step_cv(const RunTimings& t, At at) {
  const int first = first_measured_step(t), steps = t.steps - first;
  if (steps < 2) return 0;
  const std::vector<double> means = rank_means(t, at);
  double squares = 0;
  for (int r = 0; r < t.ranks; ++r)
    for (int s = first; s < t.steps; ++s)
      if (means[size_t(r)] > 0) squares += std::pow(at(r, s) / means[size_t(r)] - 1, 2);
  return std::sqrt(squares / double(t.ranks * (steps - 1)));
}

// How much the ranks differ persistently in a per-rank, per-step figure: the coefficient of variation of
// the ranks' means over the measured steps (sample deviation, n - 1); 0 with one rank. A device's
// speed_cv once the step-to-step part that does not average out is taken off (plan/calibrate).
template <typename At>
double across_ranks_cv(const RunTimings& t, At at) {
  const int first = first_measured_step(t), steps = t.steps - first;
  if (t.ranks < 2 || steps < 1) return 0;
  const std::vector<double> means = rank_means(t, at);
  double mean = 0;
  for (double m : means) mean += m / t.ranks;
  if (mean <= 0) return 0;
  double squares = 0;
  for (double m : means) squares += std::pow(m / mean - 1, 2);
  return std::sqrt(squares / (t.ranks - 1));
}

// How much the ranks' values of a per-rank, per-step figure move together from step to step: the
// Pearson correlation of every pair of ranks' series over the measured steps, averaged (a slowdown
// of the whole machine or job slows every rank at once); 0 with one rank or fewer than three steps.
template <typename At>
double cross_rank_correlation(const RunTimings& t, At at) {
  const int first = first_measured_step(t), steps = t.steps - first;
  if (t.ranks < 2 || steps < 3) return 0;
  std::vector<std::vector<double>> dev(size_t(t.ranks));
  std::vector<double> norm(size_t(t.ranks));
  for (int r = 0; r < t.ranks; ++r) {
    double mean = 0;
    for (int s = first; s < t.steps; ++s) mean += at(r, s) / steps;
    for (int s = first; s < t.steps; ++s) dev[size_t(r)].push_back(at(r, s) - mean);
    for (double d : dev[size_t(r)]) norm[size_t(r)] += d * d;
  }
  double sum = 0;
  int pairs = 0;
  for (int a = 0; a < t.ranks; ++a)
    for (int b = a + 1; b < t.ranks; ++b) {
      if (norm[size_t(a)] <= 0 || norm[size_t(b)] <= 0) continue;
      double cross = 0;
      for (int s = 0; s < steps; ++s) cross += dev[size_t(a)][size_t(s)] * dev[size_t(b)][size_t(s)];
      sum += cross / std::sqrt(norm[size_t(a)] * norm[size_t(b)]);
      ++pairs;
    }
  return pairs > 0 ? sum / pairs : 0;
}

// The CPU time of a rank's compute tasks in `step`.
double rank_compute_cpu_s(const Role& role, const RunTimings& t, int rank, int step) {
  double sum = 0;
  for (int i = 0; i < t.tasks; ++i)
    if (role.tasks[i].stream == StreamKind::Compute) sum += t.at(t.cpu_s, rank, step, i);
  return sum;
}

// {"experts": E, "layers": [{"layer": l, "tokens": [per expert]}]}: the tokens the timed ranks
// routed to each expert of every MoE layer they ran; null for a dense model.
nlohmann::json routing_json(const ModelSpec& model, const RunTimings& t) {
  if (!model.moe || t.routed_tokens.empty()) return nullptr;
  const int experts = model.moe->experts;
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < model.layers; ++l) {
    const auto row = t.routed_tokens.begin() + std::ptrdiff_t(size_t(l) * size_t(experts));
    const std::vector<double> tokens(row, row + experts);
    if (model.is_moe_layer(l) && std::accumulate(tokens.begin(), tokens.end(), 0.0) > 0)
      layers.push_back({{"layer", l}, {"tokens", tokens}});
  }
  return {{"experts", experts}, {"layers", layers}};
}

// The most CPU time a rank's compute tasks took in `step`: the step's computation with what other
// processes took from the ranks left out (its communication cannot be told apart from waiting for a
// rank that had no core, on a shared machine).
double compute_cpu_s(const Role& role, const RunTimings& t, int step) {
  double most = 0;
  for (int r = 0; r < t.ranks; ++r) most = std::max(most, rank_compute_cpu_s(role, t, r, step));
  return most;
}

}  // namespace

nlohmann::json profile_json(const ScenarioSpec& scenario, const Program& program, const RunTimings& t) {
  const Role& role = program.roles.front();
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < t.tasks; ++i) {
    const Task& task = role.tasks[i];
    std::vector<double> wall, cpu, fastest;
    std::array<std::vector<double>, std::size(kTimedKernels)> shares;  // of the task's wall time
    for (int s = first_measured_step(t); s < t.steps; ++s) {
      double fastest_rank = std::numeric_limits<double>::infinity();
      for (int r = 0; r < t.ranks; ++r) {
        const double d = t.at(t.end_s, r, s, i) - t.at(t.start_s, r, s, i);
        wall.push_back(d);
        cpu.push_back(t.at(t.cpu_s, r, s, i));
        for (size_t k = 0; k < shares.size(); ++k)
          shares[k].push_back(d > 0 ? std::min(1.0, t.at(t.*kTimedKernels[k].second, r, s, i) / d) : 0);
        fastest_rank = std::min(fastest_rank, d);
      }
      fastest.push_back(fastest_rank);
    }
    const int count = int(wall.size());
    double sum = 0;
    for (double d : wall) sum += d;
    nlohmann::json j = {{"task", task.name},
                        {"index", i},
                        {"kind", enum_name(task.kind, kTaskKindNames)},
                        {"stream", enum_name(task.stream, kStreamKindNames)},
                        {"count", count},
                        {"mean_s", count ? sum / count : 0.0},
                        {"median_s", median(wall)},
                        {"min_s", count ? *std::min_element(wall.begin(), wall.end()) : 0.0},
                        {"max_s", count ? *std::max_element(wall.begin(), wall.end()) : 0.0}};
    if (task.stream == StreamKind::Compute) {
      // The thread's CPU time leaves out the time other processes had the core (a shared machine);
      // the kernels' time is measured as wall time, so it enters as its share of the task's wall time,
      // which preemption inflates on both sides alike.
      const double cpu_s = median(cpu);
      j["cpu_s"] = cpu_s;
      for (size_t k = 0; k < shares.size(); ++k) j[kTimedKernels[k].first] = median(shares[k]) * cpu_s;
      j["cpu_cv"] = step_to_step_cv(t, [&](int r, int s) { return t.at(t.cpu_s, r, s, i); });
    }
    if (task.work.gemm_flops.value() > 0) j["gemm_flops"] = task.work.gemm_flops.value();
    if (task.kind == TaskKind::Collective) {
      j["bytes"] = task.bytes.value() * task.count;
      // A collective ends together on every rank; the rank that joined last saw the transfer alone.
      // Both ranks must be running for it to progress, so on a shared machine most steps see it
      // stretched by other processes; the 10th percentile over steps is the transfer undisturbed.
      j["transfer_s"] = quantile(fastest, 0.1);
    }
    if (task.kind == TaskKind::Copy) {  // the bytes moved, and how long the copy stream took
      j["bytes"] = task.bytes.value();
      j["transfer_s"] = median(wall);
    }
    tasks.push_back(j);
  }
  std::string device;
  int nodes = 1;
  for (const PoolSpec& p : scenario.cluster.pools)
    if (p.name == role.pool) device = p.device, nodes = p.nodes;
  const auto step_total = [&](int r, int s) { return rank_compute_cpu_s(role, t, r, s); };
  nlohmann::json profile = {
      {"format", kProfileFormat},
      {"version", kProfileVersion},
      {"scenario", scenario.name},
      {"backend", "cpu"},
      {"model", program.model},
      {"cluster", program.cluster},
      {"pool", role.pool},
      {"device", device},
      {"ranks", program.world},     // the job's, which the Program is lowered for (t.ranks: those timed)
      {"nodes", nodes},             // hosts: collectives across them are fitted apart
      {"threads", rank_threads()},  // per rank: each rank is a device of that many cores
      {"steps", t.steps},
      {"warmup_steps_excluded", first_measured_step(t)},
      {"role", role.pipeline_rank},
      {"inputs", profile_inputs_yaml(scenario, program.plan)},
      // How much a rank's compute tasks vary together: set against their own cpu_cv, calibrate tells
      // a slowdown common to the whole step from each kernel's own.
      {"step_cpu_cv", step_to_step_cv(t, step_total)},
      // And how much of that the ranks share: the correlation of their step totals.
      {"step_cpu_correlation", cross_rank_correlation(t, step_total)},
      // And how much the ranks differ throughout: the spread of their mean step totals.
      {"rank_cpu_cv", across_ranks_cv(t, step_total)},
      {"tasks", tasks}};
  if (nlohmann::json routing = routing_json(scenario.model, t); !routing.is_null())
    profile["routing"] = routing;
  return profile;
}

std::string live_chrome_trace(const Program& program, const RunTimings& t) {
  const Role& role = program.roles.front();
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < t.ranks; ++r) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r) + " (stage 0, live cpu)"}}}});
    for (const auto& [name, stream] : kStreamKindNames)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r},
                        {"tid", static_cast<int>(stream)},
                        {"args", {{"name", name}}}});
    for (int s = 0; s < t.steps; ++s)
      for (int i = 0; i < t.tasks; ++i) {
        const Task& task = role.tasks[i];
        nlohmann::json args = {{"task", i}, {"step", s + 1}};
        if (task.microbatch >= 0) args["microbatch"] = task.microbatch;
        if (task.kind == TaskKind::Collective || task.kind == TaskKind::Copy)
          args["bytes"] = task.bytes.value() * task.count;
        const double wait = t.at(t.wait_s, r, s, i);
        if (wait > 0) args["compute_blocked_s"] = wait;
        events.push_back({{"name", task.name},
                          {"cat", enum_name(task.kind, kTaskKindNames)},
                          {"ph", "X"},
                          {"pid", r},
                          {"tid", static_cast<int>(task.stream)},
                          {"ts", t.at(t.start_s, r, s, i) * 1e6},
                          {"dur", (t.at(t.end_s, r, s, i) - t.at(t.start_s, r, s, i)) * 1e6},
                          {"args", args}});
      }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

nlohmann::json live_report_json(const ScenarioSpec& scenario, const Program& program, const RunResult& result,
                                const RunTimings& t) {
  const Evaluation predicted_eval = evaluate(program, scenario.cluster, scenario.training);
  const Report predicted = make_report(scenario.name, program, predicted_eval);
  Report live = predicted;
  live.evaluator = "live";
  // Measured: mean step time over the steps after the first (warm-up), on the slowest rank.
  const int first = first_measured_step(t);
  double iteration = 0;
  TimeBreakdown b;
  const Role& role = program.roles.front();
  std::vector<double> iteration_times, iteration_busy, iteration_compute_cpu;
  for (int s = first; s < t.steps; ++s) {
    double slowest = 0, busiest = 0;
    iteration_compute_cpu.push_back(compute_cpu_s(role, t, s));
    for (int r = 0; r < t.ranks; ++r) {
      double begin = std::numeric_limits<double>::infinity(), end = 0;
      for (int i = 0; i < t.tasks; ++i) {
        begin = std::min(begin, t.at(t.start_s, r, s, i));
        end = std::max(end, t.at(t.end_s, r, s, i));
      }
      slowest = std::max(slowest, end - begin);
      busiest = std::max(busiest, t.step_cpu_s[size_t(r) * t.steps + s]);
    }
    iteration += slowest;
    iteration_times.push_back(slowest);
    iteration_busy.push_back(busiest);
    // The breakdown of rank 0, the one whose progress is printed.
    for (int i = 0; i < t.tasks; ++i) {
      const Task& task = role.tasks[i];
      const double d = t.at(t.end_s, 0, s, i) - t.at(t.start_s, 0, s, i);
      if (task.kind == TaskKind::Forward || task.kind == TaskKind::Backward) b.compute_s += d;
      if (task.kind == TaskKind::Optimizer) b.optimizer_s += d;
      if (task.kind == TaskKind::Recompute) b.recompute_s += d;
      if (task.kind == TaskKind::Copy && task.purpose != Purpose::InputBatch) b.offload_s += d;
      if (task.kind == TaskKind::Collective) {
        b.dp_comm_s += d;
        b.exposed_comm_s += t.at(t.wait_s, 0, s, i);
      }
    }
  }
  const int measured = std::max(1, t.steps - first);
  iteration /= measured;
  for (double* v :
       {&b.compute_s, &b.recompute_s, &b.optimizer_s, &b.offload_s, &b.dp_comm_s, &b.exposed_comm_s})
    *v /= measured;
  Metrics& m = live.metrics;
  m.iteration_time_s = iteration;
  m.tokens_per_s = iteration > 0 ? program.tokens_per_iteration / iteration : 0;
  m.model_tflops_per_gpu =
      iteration > 0 ? program.model_flops_per_iteration.value() / iteration / program.world / 1e12 : 0;
  m.mfu = m.hfu = iteration > 0
                      ? program.model_flops_per_iteration.value() / (iteration * predicted_eval.peak.value())
                      : 0;
  double rss = 0;
  for (double r : t.peak_rss_bytes) rss = std::max(rss, r);
  m.peak_memory_gib = rss / (1024.0 * 1024 * 1024);
  m.fits = m.peak_memory_gib <= m.memory_capacity_gib;
  live.breakdown = b;

  nlohmann::json j = to_json(live);
  j["loss"] = result.losses;
  j["iteration_times_s"] = iteration_times;
  j["iteration_busy_s"] = iteration_busy;
  j["iteration_compute_cpu_s"] = iteration_compute_cpu;
  j["steps"] = result.losses.size();
  j["ranks"] = program.world;
  j["predicted"] = to_json(predicted)["metrics"];
  j["predicted"]["breakdown"] = to_json(predicted)["breakdown"];
  j["reliability"] = {
      {"failures", 0},
      {"restarts", result.resumed_from >= 0 ? 1 : 0},
      {"resumed_from_step", result.resumed_from},
      {"lost_steps", result.lost_steps},
      {"rejected_checkpoints", result.rejected_checkpoints},
      {"checkpoints_written", result.checkpoints_written},
      {"checkpoint_overhead", result.seconds > 0 ? result.checkpoint_seconds / result.seconds : 0.0}};
  j["notes"] =
      "metrics measured over steps after the first; iteration_times_s[] per such step (the slowest rank), "
      "iteration_busy_s[] the most CPU time a rank's thread used in it (less what the scheduler gave to "
      "other processes); iteration_compute_cpu_s[] the most CPU time a rank's compute tasks took in it; "
      "peak_memory_gib is the largest "
      "resident set of a rank process; memory{} and "
      "stages[] are the twin's";
  return j;
}

}  // namespace paratwin::exec
